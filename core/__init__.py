"""convsolve: find the fastest correct OpenCL convolution among pluggable solvers, remember it, run it."""
from . import env as _env
from . import reference, tuning
from .api import (
                  applicable_solvers,
                  conv1d,
                  conv1d_backward_data,
                  conv1d_backward_weights,
                  conv2d,
                  conv2d_backward_bias,
                  conv2d_backward_data,
                  conv2d_backward_weights,
                  conv3d,
                  conv3d_backward_data,
                  conv3d_backward_weights,
                  conv_transpose1d,
                  conv_transpose2d,
                  conv_transpose3d,
                  default_handle,
)
from .arith import ceil_div, round_up
from .device.handle import Handle, list_devices
from .engine.bias_grad import backward_bias, backward_bias_workspace
from .engine.find import FindMode, find
from .engine.immediate import (
                  compile_solution,
                  get_solution_count,
                  get_solution_workspace_size,
                  get_solutions,
                  run_solution,
)
from .engine.plan import Plan, plan, run
from .engine.solutions import Solution
from .engine.split_sum import SplitSum
from .epilogue import Activation, Epilogue, EpilogueArgs, fold_batch_norm
from .errors import (
                  BuildError,
                  ContractError,
                  ConvsolveError,
                  DatabaseError,
                  DeviceError,
                  FindError,
                  NumericsError,
                  PluginError,
                  SolverError,
                  ValidationError,
)
from .hookspecs import SOLVER_API_VERSION, Buffers, Invoker, Packing, Solver, hookimpl, hookspec
from .problem import ALL_LAYOUTS, LAYOUTS, ConvDesc, Direction, Problem, TensorDesc
from .solvers.registry import registry
from .tuning import ConfigSpace

__version__ = "0.1.0"

_env.configure_logging()

__all__ = [
                  "ALL_LAYOUTS",
                  "LAYOUTS",
                  "SOLVER_API_VERSION",
                  "Activation",
                  "Buffers",
                  "BuildError",
                  "ConfigSpace",
                  "ContractError",
                  "ConvDesc",
                  "ConvsolveError",
                  "DatabaseError",
                  "DeviceError",
                  "Direction",
                  "Epilogue",
                  "EpilogueArgs",
                  "FindError",
                  "FindMode",
                  "Handle",
                  "Invoker",
                  "NumericsError",
                  "Packing",
                  "Plan",
                  "PluginError",
                  "Problem",
                  "Solution",
                  "Solver",
                  "SolverError",
                  "SplitSum",
                  "TensorDesc",
                  "ValidationError",
                  "applicable_solvers",
                  "backward_bias",
                  "backward_bias_workspace",
                  "ceil_div",
                  "compile_solution",
                  "conv1d",
                  "conv1d_backward_data",
                  "conv1d_backward_weights",
                  "conv2d",
                  "conv2d_backward_bias",
                  "conv2d_backward_data",
                  "conv2d_backward_weights",
                  "conv3d",
                  "conv3d_backward_data",
                  "conv3d_backward_weights",
                  "conv_transpose1d",
                  "conv_transpose2d",
                  "conv_transpose3d",
                  "default_handle",
                  "find",
                  "fold_batch_norm",
                  "get_solution_count",
                  "get_solution_workspace_size",
                  "get_solutions",
                  "hookimpl",
                  "hookspec",
                  "list_devices",
                  "plan",
                  "reference",
                  "registry",
                  "round_up",
                  "run",
                  "run_solution",
                  "tuning",
]
