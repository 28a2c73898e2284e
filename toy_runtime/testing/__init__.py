"""Test and demo helpers shipped in the package: loopback servers that speak real wire protocols."""
