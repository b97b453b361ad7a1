"""Quality metrics, checked against hand-computed values."""

from __future__ import annotations

import math

import pytest

from openjev.quality.metrics import (
    Prediction,
    accuracy,
    best_threshold,
    brier_score,
    confidence_auc,
    confident_shares,
    expected_calibration_error,
    fit_temperature,
    mean_confidence,
    negative_log_likelihood,
    pair_shares,
    percentile,
    ranking_auc,
    reliability,
    tempered,
    wilson_interval,
)

P = [
    Prediction(probabilities=(0.9, 0.1), gold=0),  # right, confident
    Prediction(probabilities=(0.8, 0.2), gold=1),  # wrong, confident
    Prediction(probabilities=(0.3, 0.7), gold=1),  # right
    Prediction(probabilities=(0.25, 0.25, 0.5), gold=0),  # wrong
]


def test_accuracy_and_confidence() -> None:
    assert accuracy(P) == 0.5
    assert mean_confidence(P) == pytest.approx((0.9 + 0.8 + 0.7 + 0.5) / 4)


def test_ties_choose_the_first_answer_as_the_server_does() -> None:
    assert Prediction(probabilities=(0.5, 0.5), gold=0).correct
    assert not Prediction(probabilities=(0.5, 0.5), gold=1).correct


def test_brier_score() -> None:
    expected = [0.01 + 0.01, 0.64 + 0.64, 0.09 + 0.09, 0.5625 + 0.0625 + 0.25]
    assert brier_score(P) == pytest.approx(sum(expected) / 4)


def test_reliability_bins_and_ece() -> None:
    bins = reliability(P)
    assert [b.count for b in bins] == [0, 0, 0, 0, 1, 0, 1, 1, 1, 0]
    assert bins[4].low == 0.4 and bins[4].high == 0.5  # 0.5 falls in (0.4, 0.5]
    assert bins[8].mean_confidence == 0.9 and bins[8].accuracy == 1.0
    assert bins[7].accuracy == 0.0
    assert bins[0].mean_confidence is None and bins[0].accuracy is None
    # |1-0.9| + |0-0.8| + |1-0.7| + |0-0.5|, each bin holding one of four items
    assert expected_calibration_error(P) == pytest.approx((0.1 + 0.8 + 0.3 + 0.5) / 4)


def test_confident_shares_keep_the_answers_at_or_above_each_threshold() -> None:
    shares = confident_shares(P, (0.5, 0.75, 0.8, 0.9, 0.95))
    assert [s.coverage for s in shares] == [1.0, 0.5, 0.5, 0.25, 0.0]  # 0.8 counts at 0.8
    assert [s.accuracy for s in shares] == [0.5, 0.5, 0.5, 1.0, None]
    assert math.isnan(confident_shares([], (0.5,))[0].coverage)


def test_confidence_auc_ranks_right_answers_against_wrong_ones() -> None:
    # right at 0.9 and 0.7, wrong at 0.8 and 0.5: 0.9 beats both, 0.7 beats 0.5
    assert confidence_auc(P) == pytest.approx(3 / 4)
    assert confidence_auc(P[:1]) is None


def test_perfectly_calibrated_predictions_have_zero_ece() -> None:
    right = [Prediction(probabilities=(0.75, 0.25), gold=0)] * 3
    wrong = [Prediction(probabilities=(0.75, 0.25), gold=1)]
    assert expected_calibration_error(right + wrong) == pytest.approx(0.0)


def test_tempering() -> None:
    p = Prediction(probabilities=(0.8, 0.2), gold=0)
    assert tempered(p, 1.0).probabilities == pytest.approx((0.8, 0.2))
    hot = tempered(p, 2.0).probabilities
    assert hot == pytest.approx((math.sqrt(0.8) / (math.sqrt(0.8) + math.sqrt(0.2)), 1 - hot[0]))
    assert tempered(p, 1e-3).probabilities[0] == pytest.approx(1.0)


def test_nll() -> None:
    assert negative_log_likelihood(P) == pytest.approx(
        -(math.log(0.9) + math.log(0.2) + math.log(0.7) + math.log(0.25)) / 4
    )


def test_fitted_temperature_recovers_an_overconfident_model() -> None:
    """Items whose true hit rate is 0.75, reported at the confidence of the same logits at T = 1/3."""
    true = (0.75, 0.25)
    sharpened = tempered(Prediction(probabilities=true, gold=0), 1 / 3).probabilities
    items = [Prediction(probabilities=sharpened, gold=0)] * 3 + [Prediction(probabilities=sharpened, gold=1)]
    t = fit_temperature(items)
    assert t == pytest.approx(3.0, rel=1e-6)
    after = [tempered(p, t) for p in items]
    assert after[0].probabilities == pytest.approx(true, abs=1e-6)
    assert negative_log_likelihood(after) < negative_log_likelihood(items)
    assert expected_calibration_error(after) < expected_calibration_error(items)


def test_fitted_temperature_is_a_minimum() -> None:
    t = fit_temperature(P)
    best = negative_log_likelihood(P, t)
    assert best <= negative_log_likelihood(P, t * 1.01)
    assert best <= negative_log_likelihood(P, t / 1.01)


def test_fit_needs_predictions() -> None:
    with pytest.raises(ValueError, match="no predictions"):
        fit_temperature([])


def test_percentile() -> None:
    assert percentile([3.0, 1.0, 2.0, 4.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 90) == pytest.approx(4.6)
    assert percentile([7.0], 90) == 7.0
    assert math.isnan(percentile([], 50))


def test_empty_sets_give_nan_not_zero() -> None:
    assert math.isnan(accuracy([]))
    assert math.isnan(expected_calibration_error([]))


def test_pair_shares_count_pairs_by_their_right_halves() -> None:
    got = pair_shares([[True, True], [True, False], [False, True], [False, False], [True, True, True]])
    assert got.pairs == 5
    assert (got.all_right, got.none_right) == pytest.approx((2 / 5, 1 / 5))
    assert math.isnan(pair_shares([]).all_right)


def test_auc_counts_ordered_pairs_and_half_ties() -> None:
    assert ranking_auc([0.9, 0.8, 0.2, 0.1], [True, True, False, False]) == 1.0
    assert ranking_auc([0.1, 0.2, 0.8, 0.9], [True, True, False, False]) == 0.0
    # positives 0.6, 0.4 against negatives 0.5, 0.4: (1 + 1) + (0 + 0.5) wins of 4 pairs
    assert ranking_auc([0.6, 0.4, 0.5, 0.4], [True, True, False, False]) == pytest.approx(2.5 / 4)
    assert ranking_auc([0.3, 0.7], [True, True]) is None


def test_best_threshold_finds_the_cut_a_shifted_prior_would_need() -> None:
    # A model that ranks perfectly but says "no" to everything (all P(yes) < 0.5): 50 % at 0.5, 100 % at 0.3.
    scores = [0.35, 0.4, 0.45, 0.2, 0.25, 0.3]
    gold = [True, True, True, False, False, False]
    fit = best_threshold(scores, gold)
    assert fit.accuracy == 1.0 and fit.threshold == pytest.approx(0.325)
    assert ranking_auc(scores, gold) == 1.0


def test_best_threshold_prefers_the_cut_nearest_one_half_among_equals() -> None:
    fit = best_threshold([0.1, 0.45, 0.55, 0.9], [False, False, True, True])
    assert fit.threshold == pytest.approx(0.5) and fit.accuracy == 1.0
    everything_yes = best_threshold([0.2, 0.3], [True, True])
    assert everything_yes.accuracy == 1.0 and everything_yes.threshold < 0.2
    assert math.isnan(best_threshold([], []).accuracy)


def test_wilson_interval_matches_the_textbook_values_and_stays_inside_zero_one() -> None:
    eight = wilson_interval(8, 10)
    assert eight is not None and [eight.low, eight.high] == pytest.approx([0.4902, 0.9433], abs=1e-4)
    none, every = wilson_interval(0, 10), wilson_interval(10, 10)
    assert none is not None and none.low == 0.0 and none.high == pytest.approx(0.2775, abs=1e-4)
    assert every is not None and every.high == 1.0 and every.low == pytest.approx(0.7225, abs=1e-4)
    assert wilson_interval(0, 0) is None
