"""The benchmark's scenarios, P1 to P9, one module each; `bench.run` drives them."""
