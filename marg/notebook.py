"""The entry points ``import marg`` gives a notebook: bundles → verified Summary → model → predictions.

Each is one call of what ``marg learn`` / ``marg predict`` do, with the same checks: bundles
are verified against a trust store (or accepted unsigned only when asked), model files are
verified before use, rows are coded through the study codebook. They return objects
(:class:`marg.marginals.summary.Summary`, :class:`marg.learners.estimator.model.Model`), not exit codes;
errors are :mod:`marg.errors` exceptions whose messages name the Python keyword to change.

>>> import marg
>>> summary = marg.load_summary(["north.bundle", "south.bundle"], trust="trust/", key="learner.seal.key")
>>> model = marg.learn(summary, "dcc", greedy=True)
>>> model.score("holdout.csv")                      # accuracy on labelled rows (a file, DataFrame or Arrow table)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence


PathLike = str | os.PathLike


def load_summary(bundles: PathLike | Sequence[PathLike], trust: PathLike | None = None, key: PathLike | None = None,
                 allow_unsigned: bool = False, passphrase_file: PathLike | None = None) -> Any:
    """Open, verify and sum site bundles into one Summary (what ``marg learn`` learns from).

    Parameters
    ----------
    bundles : path or list of paths
        The sites' bundle files.
    trust : folder of ``SITE.sign.pub`` files
        The trust store; a signed bundle by a key not in it is refused.
    key : path
        The learner's sealing key (``LEARNER.seal.key``), to open bundles sealed to it.
    allow_unsigned : bool
        Accept bundles without a signature (their site is not authenticated).
    passphrase_file : path
        The file holding ``key``'s passphrase, if it has one.

    Returns
    -------
    marg.marginals.summary.Summary
        ``summary.n`` the (float) row count, ``summary.n_exact`` the integer count of an exact
        release (None under DP noise).
    """
    from marg.protocols.load import load_summary as _load

    paths = [bundles] if isinstance(bundles, (str, os.PathLike)) else list(bundles)
    return _load(paths, trust=trust, allow_unsigned=allow_unsigned, key=key, passphrase_file=passphrase_file)


def learn(summary: Any, learner: Any = "auto", **params: Any) -> Any:
    """Fit a learner on ``summary`` and return the certified model, as ``marg learn`` does.

    Parameters
    ----------
    summary : Summary
        From :func:`load_summary`.
    learner : str or estimator
        A learner name (``"auto"``, ``"mrc"``, ``"dcc"``, ``"renyi"``, ``"nb"``, ``"boost"``), or an
        estimator (``marg.DCC(greedy=True)``): a clone of it is fitted, the estimator itself is
        left unfitted and unchanged (scikit-learn's convention; the model's ``estimator`` is the fitted one).
    **params
        With a name: the learner's options, as ``marg learn`` takes them (``coverage``, ``s``,
        ``greedy``, ``max_edges``, …; one that the learner does not take is an InputError); with
        either, feature selection (``select``, ``max_features``, ``feature_cost``). The name and
        the estimator give the same model (:func:`marg.learners.learn.learn`, the one fit).

    Returns
    -------
    marg.learners.estimator.model.Model
        Its certificate bounds the worst-case error of the rule it predicts with (every
        estimator's ``certificate_`` does; the same value ``marg learn`` prints). Save it with
        :func:`save_model`.
    """
    from marg.learners.learn import learn as learn_model

    selection = {k: params.pop(k) for k in ("select", "max_features", "feature_cost", "norm", "time_limit")
                 if k in params}
    return learn_model(summary, learner, params, given=set(params), **selection).model


def save_model(model: Any, path: PathLike, sign_key: PathLike | None = None,
               passphrase_file: PathLike | None = None) -> str | None:
    """Write ``model`` to ``path`` (atomically) and sign it with the learner's key, as ``marg learn`` does.

    Parameters
    ----------
    sign_key : path to ``NAME.sign.key``
        The signer is NAME (its public half goes into the sites' model trust stores).
        Without it the file is unsigned, and sites refuse it unless they allow unsigned models.

    Returns
    -------
    str or None
        The signing key's id (None: unsigned).
    """
    from marg.protocols.keys import load_signing_key, read_passphrase_file
    from marg.protocols.model_signing import sign_model_file

    model.save(path)
    if sign_key is None:
        return None
    pw = read_passphrase_file(passphrase_file) if passphrase_file else None
    return sign_model_file(path, load_signing_key(sign_key, pw), Path(sign_key).name.split(".")[0])


def model_card(model: Any, path: PathLike, data: Any = None) -> Path:
    """Write ``model``'s HTML model card to ``path`` (as ``marg report``); with labelled ``data``
    (a file, data frame or Arrow table) the card shows the evaluation on it."""
    from marg._util import atomic_write_bytes
    from marg.learners.estimator.model import evaluate
    from marg.marginals.data.frames import encode_rows
    from marg.reports.model_card import model_card as _card

    ev = None
    if data is not None:
        enc = encode_rows(data, model.codebook, with_label=True)
        ev = evaluate(model, enc.X, enc.y)
    p = Path(path)
    atomic_write_bytes(p, _card(model, ev, source=p.name).encode("utf-8"))
    return p


__all__ = ["learn", "load_summary", "model_card", "save_model"]
