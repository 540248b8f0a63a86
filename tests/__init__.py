"""The test suite by tier: unit/, contract/, system/ and peers/<peer>/; support/ holds the shared helpers."""
