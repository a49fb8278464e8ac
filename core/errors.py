"""The convsolve exception hierarchy: every error the library raises on purpose."""


class ConvsolveError(Exception):
    """Base of every error convsolve raises on purpose."""


class ValidationError(ConvsolveError, ValueError):
    """Invalid input: names the offending field and value, raised before anything reaches OpenCL."""

    def __init__(self, field: str, value: object, why: str) -> None:
        self.field = field
        self.value = value
        super().__init__(f"invalid {field}={value!r}: {why}")


class ErrataError(ValidationError):
    """A malformed errata file (docs/environment.md, Errata): names the file, then the entry (its
    index in the list, from 0), the field and the value at fault, or the line of invalid JSON."""

    def __init__(self, path: str, entry: int | None, field: str, value: object,
                 why: str) -> None:
        super().__init__(field, value, why)
        self.path, self.entry = path, entry
        where = "" if entry is None else f", entry {entry}"
        self.args = (f"errata file {path}{where}: {self.args[0]}",)


class PluginError(ConvsolveError):
    """A plugin or solver that cannot be loaded or does not honour the solver contract."""

    def __init__(self, message: str, plugin: object = None) -> None:
        self.plugin = plugin
        super().__init__(message)


class ContractError(PluginError):
    """A solver's hook that raised or answered outside the contract while the core called it."""

    def __init__(self, solver_name: str, reason: str) -> None:
        self.solver_name, self.reason = solver_name, reason
        super().__init__(f"{solver_name!r}: {reason}")


class SolverError(ConvsolveError, ValueError):
    """A named solver that is unknown, disabled or not applicable to the problem."""


class DeviceError(ConvsolveError):
    """No usable OpenCL device, or the one asked for cannot be found or cannot build kernels."""


class BuildError(ConvsolveError):
    """An OpenCL program failed to build; the message holds the options and the build log."""

    def __init__(self, message: str, log: str = "") -> None:
        self.log = log
        super().__init__(message)


class FindError(ConvsolveError):
    """find() could not produce a single working solver; the message lists every skip reason."""


class DatabaseError(ConvsolveError):
    """A find-db or perf-db that cannot be read or written (read-only, locked too long, corrupt
    and not movable, a bad path), or an export that cannot be read or written or is of a newer
    format; find, run and immediate mode warn and go on without the db."""


class NumericsError(ConvsolveError):
    """NaN or inf in a convolution's inputs or output, under CONVSOLVE_CHECK_NUMERICS=2."""


class ModelError(ConvsolveError):
    """A learned solver-ranking model (convsolve.heuristics) or its training data that cannot be
    used: unreadable, truncated, of another format or version, features other than the code's,
    arrays of the wrong shape or non-finite values; the message names the file and the field."""

    def __init__(self, message: str, path: object = None) -> None:
        self.path = path
        super().__init__(message)
