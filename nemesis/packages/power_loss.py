"""power-loss: a kill of a node whose un-fsynced writes live only in its memory: the nodes
run with ``chaoskraft.power.loss.enable=true``, so a killed node loses what it had not
fsynced, as a machine losing power does. Targets: the campaign's ``power_loss_targets``
(default one, minority)."""
from __future__ import annotations

from .kill import Kill


class PowerLoss(Kill):
    name = "power-loss"
    properties = {"chaoskraft.power.loss.enable": "true"}
    opens = ("power-loss",)
    colour = "#9d1c1c"
    first = {}

    @classmethod
    def targets_for(cls, workload, opts, power_loss_targets):
        if "targets" in opts:
            return {t: 1 for t in opts["targets"]}
        return {t: 1 for t in power_loss_targets}

    @classmethod
    def first_target(cls, workload, power_loss_targets):
        return power_loss_targets[0]


PACKAGE = PowerLoss
