"""refkit: the serving pieces both reference servers share, and no protocol."""
