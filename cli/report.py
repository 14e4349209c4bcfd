"""``marg report``: a model card as one self-contained HTML file. Parses options and writes; the library renders."""


from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import app
from .common import JsonOpt, OutOpt, emit_json
from .learn import SchemaCheck


@app.command("report")
def report_cmd(
    model: Annotated[Path, typer.Argument(help="A model file written by `marg learn` (or `marg certify`).")],
    out: OutOpt,
    data: Annotated[Optional[Path], typer.Option("--data",
                                                 help="Labelled rows (under the model's codebook) to evaluate the "
                                                      "model on, shown beside the certificate.")] = None,
    trust: Annotated[Optional[Path], typer.Option("--trust", help="Trust store of the learner's key: the model's "
                                                                  "signature is verified against it.")] = None,
    allow_unsigned: Annotated[bool, typer.Option("--allow-unsigned", help="Accept an unsigned model.")] = False,
    schema: SchemaCheck = None,
    json_out: JsonOpt = False,
) -> None:
    """Write a model card: task, learner, certificate in plain words, weights, provenance (HTML, no network
    resources)."""
    from marg import api
    from marg._util import atomic_write_bytes
    from marg.reports.model_card import model_card

    m, signer, _ = api.load_verified_model(model, schema, trust, allow_unsigned)  # read once; a refusal exits 1 first
    if data is not None and schema is None and not allow_unsigned:
        from marg.errors import InputError

        raise InputError(f"{model}: give the codebook --data is coded under (--schema): a model fitted under another "
                         "study's codebook would be evaluated silently wrong")
    m.info = {**m.info, "signed_by": signer}
    evaluation = api.evaluate_file(m, data) if data is not None else None
    atomic_write_bytes(out, model_card(m, evaluation, source=model.name).encode("utf-8"))
    if json_out:
        emit_json({"out": str(out), "model": str(model), "learner": m.learner, "signed_by": signer,
                   "worst_case_error": float(m.estimator.certificate_.value),
                   "evaluated_on": None if data is None
                   else {"data": str(data), "n": evaluation["n"], "error": evaluation["error"]}})
        return
    typer.echo(f"wrote {out}: model card of {model.name}" + (f", evaluated on {data.name}" if data is not None else ""))
