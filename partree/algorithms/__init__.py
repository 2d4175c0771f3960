"""The serial O(N) algorithms: one module each."""
