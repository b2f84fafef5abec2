"""Stateful operator scale-out (seed: stateful-operator-scale-out.txt), pure library.

* :mod:`.operator_state`: theta as key/value pairs, ``decompose`` / ``compose`` by hash;
* :mod:`.checkpoint`: ``Checkpoint(theta, tau, beta)``, a keyed operator, restore with replay;
* :mod:`.score`: bottleneck score 0..100 and the scale_in / alarming / scale_out detector;
* :mod:`.base` and :mod:`.policies`: checkpointing, active-backup and restart policies
  as state machines emitting actions;
* :mod:`.fairness`: fairness degree (Eq. 5) and its application average (Eq. 6).
"""

from skewlab.state.base import (
    Action,
    FeedInput,
    Phase,
    PolicySnapshot,
    Replay,
    Role,
    ScaleOutPolicy,
    SplitState,
    StartInstances,
    StopInstances,
    SwitchRouting,
    TakeCheckpoint,
)
from skewlab.state.checkpoint import (
    Checkpoint,
    KeyedOperator,
    Reducer,
    StreamTuple,
    count_sum,
    replay_input,
    restore,
)
from skewlab.state.fairness import FairnessTracker, app_fairness, fairness_degree
from skewlab.state.operator_state import (
    KeyHash,
    OperatorState,
    SplitHashes,
    compose,
    decompose,
    default_hash,
    owner,
    repartition,
    split_hash,
    split_hashes,
)
from skewlab.state.policies import (
    POLICIES,
    ActiveBackupConfig,
    CheckpointingConfig,
    PolicyConfig,
    RestartConfig,
    make_policy,
)
from skewlab.state.score import (
    Level,
    ScoreConfig,
    Signals,
    ThresholdConfig,
    ThresholdDetector,
    bottleneck_score,
)

__all__ = [
    "POLICIES",
    "Action",
    "ActiveBackupConfig",
    "Checkpoint",
    "CheckpointingConfig",
    "FairnessTracker",
    "FeedInput",
    "KeyHash",
    "KeyedOperator",
    "Level",
    "OperatorState",
    "Phase",
    "PolicyConfig",
    "PolicySnapshot",
    "Reducer",
    "Replay",
    "RestartConfig",
    "Role",
    "ScaleOutPolicy",
    "ScoreConfig",
    "Signals",
    "SplitHashes",
    "SplitState",
    "StartInstances",
    "StopInstances",
    "StreamTuple",
    "SwitchRouting",
    "TakeCheckpoint",
    "ThresholdConfig",
    "ThresholdDetector",
    "app_fairness",
    "bottleneck_score",
    "compose",
    "count_sum",
    "decompose",
    "default_hash",
    "fairness_degree",
    "make_policy",
    "owner",
    "repartition",
    "replay_input",
    "restore",
    "split_hash",
    "split_hashes",
]
