"""Local runtime: moto's server on 127.0.0.1 as the embedded AWS (needs the dev extras)."""
