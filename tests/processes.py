"""What the tests that kill processes ask of the system: whether a process still runs."""
from pathlib import Path


def running(pid):
    """Whether process ``pid`` exists and is not a zombie (an orphan's reaper may be slow)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False
