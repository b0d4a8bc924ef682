"""Runtime pieces every Strand service shares: logging, gRPC server setup."""
