"""Learned solver ranking: features, boosted trees, the model, its data and its evaluation.

Pure numpy at run time (gbdt.py says why); the engine asks a RankingModel for predicted times
(`predict_ms`) and how many of its top picks a budgeted find should time (`auto_count`).  The
cross-validation is `convsolve.heuristics.evaluate.evaluate` (not re-exported here, where its
name would hide its module's).
"""
from .data import Dataset, Record, read_dataset, write_dataset
from .evaluate import Breakdown, RefitReport, Report, Scores, refit
from .features import FEATURE_NAMES, DeviceFacts, problem_features
from .gbdt import Ensemble, Forest, Params
from .model import RankingModel, demoted
from .split import geometry, grouped_folds, held_out

__all__ = ["FEATURE_NAMES", "Breakdown", "Dataset", "DeviceFacts", "Ensemble", "Forest",
           "Params", "RankingModel", "Record", "RefitReport", "Report", "Scores", "demoted",
           "geometry", "grouped_folds", "held_out", "problem_features",
           "read_dataset", "refit", "write_dataset"]
