"""The engine: find, config search, run, immediate mode, epilogue fusion, output checks and the find worker."""
