"""Fork history: finding, fetching, describing and comparing a fork's downstream commits over its upstream."""
