"""Protocol profiles: each package holds one profile's requirements and checks."""
