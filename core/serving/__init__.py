"""Serving: the one loader (system name -> system) and the one runner (system + query -> ranking)."""
