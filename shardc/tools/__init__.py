"""What sits on top: the command line, reports of compiled programs, notebook views, launch."""
