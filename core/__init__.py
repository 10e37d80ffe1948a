"""The lowest layer: what every other package may use and that uses none of them."""
