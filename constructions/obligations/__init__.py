"""Obligations: what a construction promises about its model, as data a generic checker tests.

A certificate (``verify/certify/``) proves that a compiled model is exact on *every* input
up to its max_len.  The checker computes everything from the model's tensors; a construction
contributes only *obligations* -- the discrete program its weights are meant to run:

* :class:`Embedding`: the integer code every token (and BOS) writes into each tracked subspace;
* per layer, :class:`Fetch` for each copying head (the key position it must attend to from every
  query position, and which subspace it copies where), :class:`Recent` for a head whose key
  depends on the input (the most recent flagged position, Lemma 16), :class:`Average` for the
  heads of a prefix sum (Lemma 15), :class:`Match` for a head that finds the most recent key
  holding the code its query looks for (Theorem 12's nearest value), and one MLP obligation --
  :class:`Compose` (the composition of transition maps, Theorem 10's Lemma 14 role),
  :class:`Lookup` (a finite function of integer codes, Lemma 11), :class:`SuffixLookup` (one
  given by keys on leading codes whose rows add up, never listing the combinations), :class:`Steps` (several such
  functions, :class:`Modular` decodes and :class:`Round` clean-ups, one after another, fused into
  one MLP) or :class:`Races` (counts of comparisons between two recencies, Theorem 12's boundary
  count);
* :class:`Readout`: which output each reachable final code must win;
* content-dependent heads beyond the flag: :class:`Latest` (the most recent position whose codes
  match a set, a bounded stack's last push per level) and :class:`AnyFlag` with its
  :class:`Threshold` MLP ("some flag so far"), checked by ``verify/certify/latest.py``;
* :class:`Promise`: a partial automaton's model is vouched for on legal inputs only; its claims
  restrict the value sets to what legal inputs reach, and the certificate records the promise.

A subspace is named as in the model's layout: ``name``, ``name[i]`` for one of its dims, or
several joined by `` + `` (their dims in order), as a head that serves several sums reads them.

Obligations are computed from the plan and the automaton, never from the weights, so a wrong
weight cannot be excused by the construction: the checker finds that the tensors do not run
the declared program.  Obligations are plain data with a canonical JSON form
(:meth:`Obligations.to_json`, read back by :meth:`Obligations.from_json`) whose digest the
certificate records.

Each kind is one frozen dataclass that serialises, renames and names what it reads and writes
itself (:mod:`.kind`): the heads' kinds in :mod:`.heads`, the MLPs' in :mod:`.mlps`, the whole
declaration in :mod:`.declared`.  A kind is added by one class there, registered by its
``kind`` string, and one rule per checker in ``verify/certify/`` (its weight check and its
concrete semantics), which refuse a kind they have no rule for by name.
"""

from .declared import (Embedding, Joint, Layer, Obligations, Promise, Readout, Undeclared, keys_reached,
                       one_hot_readout, prefixed)
from .heads import AnyFlag, Average, Fetch, HeadKind, Latest, Match, Recent, absolute_keys, offset_keys
from .kind import KINDS, Container, Kind, Part, kind_from_json
from .mlps import Beside, Compose, Lookup, MLPKind, Modular, Race, Races, Round, Steps, SuffixLookup, Threshold

__all__ = ["AnyFlag", "Average", "Beside", "Compose", "Container", "Embedding", "Fetch", "HeadKind", "Joint", "KINDS",
           "Kind", "Latest", "Layer", "Lookup", "MLPKind", "Match", "Modular", "Obligations", "Part", "Promise", "Race",
           "Races", "Readout", "Recent", "Round", "Steps", "SuffixLookup", "Threshold", "Undeclared", "absolute_keys",
           "kind_from_json", "keys_reached", "offset_keys", "one_hot_readout", "prefixed"]
