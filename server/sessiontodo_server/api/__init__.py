"""The gRPC face: the servicer, conversions, the error table, guards, auth and TLS."""
