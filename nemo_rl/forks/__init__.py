"""A fork's downstream commits over its upstream: fetched, described and compared."""
