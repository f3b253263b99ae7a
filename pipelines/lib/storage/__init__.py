"""Storage: the Delta lake (local or S3), the landing folder producers deliver into, the result cache."""
