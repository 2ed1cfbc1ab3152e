"""Worker-side functions of the algorithms not yet moved into their runner folders."""
