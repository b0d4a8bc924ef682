"""Generated gRPC contracts (strand.v1). Do not edit: run `make proto`."""
