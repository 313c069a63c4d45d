"""The xmemo profile's checks: one module per requirement family."""
