"""Neighbour relations (distdp.privacy.neighbours): one constant per relation, used by every domain."""
import json

import numpy as np
import pytest

from distdp.completion import perturbation as pt
from distdp.lda.private import dense, single_topic
from distdp.privacy import neighbours as nb
from distdp.privacy.neighbours import (CHANGE_ONE_ENTRY, REPLACE_ONE_DOCUMENT, REPLACE_ONE_POINT, SYMMETRIC_ENTRY,
                                       NeighbourRelation, relation_from_dict)
from distdp.privacy.vocabulary import dp_select_vocabulary
from distdp.tensor import dp as tensor_dp
from distdp.tensor import forms


def test_relation_is_frozen_and_round_trips_through_json():
    rel = NeighbourRelation("replace-one-x", "two sets differ in one x", ("n",))
    with pytest.raises(AttributeError):
        rel.name = "other"
    assert relation_from_dict(json.loads(json.dumps(rel.to_dict()))) == rel
    assert str(rel) == "replace-one-x: two sets differ in one x (public: n)"
    assert str(NeighbourRelation("a", "b")) == "a: b"


def test_every_constant_is_registered_by_its_name():
    assert nb.RELATIONS == {r.name: r for r in (REPLACE_ONE_DOCUMENT, CHANGE_ONE_ENTRY, SYMMETRIC_ENTRY,
                                                nb.IMTIAZ_SARWATE, REPLACE_ONE_POINT)}
    assert all(r.description and r.public for r in nb.RELATIONS.values())


def test_lda_mechanisms_share_one_relation():
    """Dense, single-topic and vocabulary releases all record REPLACE_ONE_DOCUMENT (no per-mechanism texts)."""
    rng = np.random.default_rng(0)
    counts = rng.poisson(2.0, size=(60, 8)) + 1
    d = dense.fit_dense(counts, 2, 1.0, "agn", epsilon=50.0, delta=1e-5, rng=np.random.default_rng(1),
                        reproducible=True)
    s = single_topic.agn(counts, 2, epsilon=50.0, delta=1e-5, rng=np.random.default_rng(2), reproducible=True)
    words = [f"w{i}" for i in range(8)]
    doc, word = np.nonzero(counts)
    v = dp_select_vocabulary(doc, word, words, epsilon=5.0, delta=1e-6, rng=np.random.default_rng(3))
    for report in (d.privacy, s.privacy, v.report()):
        assert report.neighbour is REPLACE_ONE_DOCUMENT
        assert all(r.neighbour == str(REPLACE_ONE_DOCUMENT) for r in report.ledger.releases)
    # what a mechanism assumes of the data is an assumption, not part of the relation
    assert any("3 tokens" in a for a in s.privacy.assumptions)


def test_tensor_neighbours_hold_a_relation_and_their_sensitivities():
    assert tensor_dp.SYMMETRIC_ENTRY.relation is SYMMETRIC_ENTRY and tensor_dp.SYMMETRIC_ENTRY.name == "symmetric-entry"
    point = tensor_dp.replace_one_point(100, 2.0)
    assert point.relation is REPLACE_ONE_POINT and "n = 100" in point.description
    U = np.eye(3)[:, :2]
    np.testing.assert_allclose(point.apply_sensitivity(U), 2 * 8 / 100)
    V = np.linalg.qr(np.random.default_rng(0).standard_normal((5, 2)))[0]
    res = tensor_dp.private_power_method(forms.rank_one_sum([50.0, 30.0], V), 2, epsilon=1.0, delta=1e-6,
                                         n_restarts=2, n_iters=3)
    assert res.privacy.neighbour is SYMMETRIC_ENTRY
    assert res.privacy.to_dict()["neighbour"] == SYMMETRIC_ENTRY.to_dict()


def test_completion_reports_name_change_one_entry():
    for report in (pt.none_report(), pt.input_report(1.0, (0.0, 1.0), 10, True, False),
                   pt.dpsgd_report(2.0, 0.1, 3, 30, 8, 1e-6, 1.0, "A, B, C"),
                   pt.output_report(1.0, 0.5, 3, 1.0, 0.1, 4)):
        assert report.neighbour is CHANGE_ONE_ENTRY
        assert all(r.neighbour == str(CHANGE_ONE_ENTRY) for r in getattr(report.ledger, "releases", []))
