"""Entropy-based positioning: where a posed question lies for the solver, read from the spread of its answers.

The solver answers a question ``n`` times; its answers are clustered (:func:`stackrl.answers.group_answers`) and
the entropy of the answered rows over the clusters, divided by ``log n`` (the most ``n`` answers could spread), is
the question's normalised answer entropy ``H``. A question the solver always answers alike (``H`` below the band)
is mastered, one whose answers scatter (above the band, or none answered) is chaos, and one in between lies in the
Zone of Proximal Development: the solvability gap AERO trains on.
"""

from __future__ import annotations

import math
from enum import Enum

from stackrl.answers import GroupAnswers


class Zone(str, Enum):
    mastery = "mastery"  # the answers (nearly) all agree: too easy
    zpd = "zpd"  # neither: the solvability gap
    chaos = "chaos"  # the answers scatter, or none was given: too hard


def normalised_entropy(group: GroupAnswers) -> float:
    """``H = -sum_i p_i log p_i / log n``: ``p_i`` the share of the answered rows in cluster ``i`` (rows without an
    answer left out, as the authors drop unparsed answers), ``n`` every sample, answered or not. 0 for ``n < 2``."""
    return group.entropy / math.log(group.size) if group.size > 1 else 0.0


def zone(group: GroupAnswers, low: float, high: float) -> Zone:
    """The question's zone: chaos when nothing was answered, mastery below ``low``, ZPD in ``[low, high]`` (both
    bounds in), chaos above ``high``."""
    if not group.answered:
        return Zone.chaos
    h = normalised_entropy(group)
    if h < low:
        return Zone.mastery
    return Zone.zpd if h <= high else Zone.chaos
