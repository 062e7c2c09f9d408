"""The worklist server (manage.py dicom_worklist): a pynetdicom AE accepting Verification (C-ECHO), the
Modality Worklist Information Model - FIND (C-FIND) and Modality Performed Procedure Step (N-CREATE,
N-SET), for the calling AE titles allowed in the admin only.

Every handler runs in its association's thread and reads the database there, on one connection per
association (a modality polls on one association: no reconnect per query); the connection is closed when
the association is released or aborted, and whenever Django would close it (CONN_MAX_AGE, errors). A handler
never raises: a domain refusal is the DIMSE status PS3.4 gives for it, anything unexpected is logged (ids
only, never a patient's data) and answered as a processing failure, and the server keeps serving.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any, cast

from django.conf import settings
from django.db import close_old_connections, connection
from pydicom import config as pydicom_config
from pydicom.dataset import Dataset
from pynetdicom import AE, _config, evt
from pynetdicom import dimse_messages as pynetdicom_dimse_messages
from pynetdicom import service_class as pynetdicom_service_class

from clinic.errors import Conflict, InvalidState, NotFound
from integrations.dicom.admission import Admission, Limits, PeerSocket, WorklistServer
from integrations.dicom.encoding import EncodedAnswer
from integrations.dicom.selectors import Caller, calling_ae_allowed
from integrations.dicom.worklist import (
    QueryError,
    answer_elements,
    answers_alerts,
    query_from_identifier,
    requested_keys,
)
from lab.ports import imaging_procedure_finish, imaging_procedure_start, imaging_worklist

logger = logging.getLogger("integrations.dicom")

# The SOP classes served (PS3.4 annexes A, K and F; pynetdicom.sop_class names them, untyped).
VERIFICATION = "1.2.840.10008.1.1"
MODALITY_WORKLIST_FIND = "1.2.840.10008.5.1.4.31"
MODALITY_PERFORMED_PROCEDURE_STEP = "1.2.840.10008.3.1.2.3.3"

# DIMSE statuses (PS3.4 C.4.1.1.4 for C-FIND, PS3.7 C for N-CREATE/N-SET, PS3.4 F.7.2 for MPPS).
SUCCESS = 0x0000
PENDING = 0xFF00
FIND_IDENTIFIER_MISMATCH = 0xA900
FIND_UNABLE_TO_PROCESS = 0xC001
INVALID_ATTRIBUTE_VALUE = 0x0106
PROCESSING_FAILURE = 0x0110
DUPLICATE_INSTANCE = 0x0111
NO_SUCH_INSTANCE = 0x0112
MISSING_ATTRIBUTE = 0x0120
MPPS_NOT_UPDATABLE = 0xA710  # the ErrorID of a processing failure on a finished step


def _calling_ae_title(event: Any) -> str:
    # The A-ASSOCIATE-RQ's own: the requestor's ae_title is only filled in after EVT_REQUESTED.
    return str(event.assoc.requestor.primitive.calling_ae_title).strip()


def _caller(event: Any) -> Caller | None:
    return calling_ae_allowed(ae_title=_calling_ae_title(event), address=str(event.assoc.requestor.address))


def _failure(status: int, comment: str, error_id: int | None = None) -> Dataset:
    answer = Dataset()
    answer.Status = status
    answer.ErrorComment = comment[:64]
    if error_id is not None:
        answer.ErrorID = error_id
    return answer


# A-ASSOCIATE-RJ (result, source, reason) of PS3.8 9.3.4.
CALLING_AE_NOT_RECOGNISED = (0x01, 0x01, 0x03)
CALLED_AE_NOT_RECOGNISED = (0x01, 0x01, 0x07)
LOCAL_LIMIT_EXCEEDED = (0x02, 0x03, 0x02)


def _reject(event: Any, reason: tuple[int, int, int], message: str) -> None:
    logger.info(message, extra={"calling_ae": _calling_ae_title(event), "address": str(event.assoc.requestor.address)})
    event.assoc.acse.send_reject(*reason)
    # As pynetdicom's own rejections do: wait until the DUL has sent the A-ASSOCIATE-RJ (and the peer
    # closed or the ARTIM timer expired), or the socket would be shut before the rejection leaves.
    event.assoc.kill()


def handle_requested(event: Any, admission: Admission) -> None:
    """Reject (permanent) a request that calls another AE title than ours, or from a calling AE title not
    allowed from that address; then (transient, local limit exceeded) one over the association limits of its
    address or of the server. Only a request that passes takes an association slot (integrations.dicom.admission)."""
    called = str(event.assoc.requestor.primitive.called_ae_title).strip()
    if called != str(event.assoc.acceptor.ae_title).strip():
        _reject(event, CALLED_AE_NOT_RECOGNISED, "dicom association rejected: called AE title not recognised")
        return
    try:
        close_old_connections()
        allowed = _caller(event) is not None
    except Exception:
        logger.exception("dicom association check failed")
        allowed = False
    finally:
        connection.close()
    if not allowed:
        _reject(event, CALLING_AE_NOT_RECOGNISED, "dicom association rejected: calling AE title not recognised")
        return
    sock = event.assoc.dul.socket.socket
    if isinstance(sock, PeerSocket) and not admission.admit(sock):
        _reject(event, LOCAL_LIMIT_EXCEEDED, "dicom association rejected: association limit reached")


def handle_association_end(event: Any) -> None:
    connection.close()


def handle_echo(event: Any) -> int:
    return SUCCESS


def handle_find(event: Any) -> Iterator[tuple[int, Dataset | None]]:
    """The matching items as pending answers, then success (pynetdicom sends it when the generator ends)."""
    try:
        caller = _caller(event)
        if caller is None:  # deactivated since the association began
            yield FIND_UNABLE_TO_PROCESS, None
            return
        requested = event.identifier
        query = query_from_identifier(requested, branch_id=caller.branch_id, zone=caller.zone)
        entries = imaging_worklist(query, limit=settings.DICOM_WORKLIST_MAX_RESULTS)
        keys = requested_keys(requested)
        alerts = answers_alerts(entries, keys)
        answers = [EncodedAnswer(answer_elements(entry, keys, alerts)) for entry in entries]
    except QueryError as exc:
        logger.info("dicom c-find refused", extra={"reason": str(exc)})
        yield FIND_IDENTIFIER_MISMATCH, None
        return
    except Exception:
        logger.exception("dicom c-find failed")
        yield FIND_UNABLE_TO_PROCESS, None
        return
    finally:
        close_old_connections()
    logger.info("dicom c-find", extra={"calling_ae": caller.ae_title, "matches": len(answers)})
    for answer in answers:
        if event.is_cancelled:
            yield 0xFE00, None  # cancelled by the modality (C-CANCEL)
            return
        yield PENDING, answer


def _created(event: Any) -> Dataset:
    created = Dataset()
    created.update(event.attribute_list)
    return created


def handle_n_create(event: Any) -> tuple[int | Dataset, Dataset | None]:
    """An MPPS IN PROGRESS for the accession number of its first scheduled step: the item starts."""
    try:
        caller = _caller(event)
        uid = event.request.AffectedSOPInstanceUID
        attributes = event.attribute_list
        if caller is None:
            return _failure(PROCESSING_FAILURE, "Calling AE no longer allowed"), None
        if not uid:
            return _failure(MISSING_ATTRIBUTE, "Affected SOP Instance UID required"), None
        if str(attributes.get("PerformedProcedureStepStatus", "")) != "IN PROGRESS":
            return _failure(INVALID_ATTRIBUTE_VALUE, "Status must be IN PROGRESS"), None
        steps = attributes.get("ScheduledStepAttributesSequence") or []
        accession = str(steps[0].get("AccessionNumber", "") or "").strip() if steps else ""
        if not accession:
            return _failure(MISSING_ATTRIBUTE, "Accession Number required"), None
        imaging_procedure_start(branch_id=caller.branch_id, accession_number=accession, mpps_instance_uid=str(uid))
    except NotFound:
        return _failure(PROCESSING_FAILURE, "Unknown accession number"), None
    except InvalidState as exc:
        return _failure(PROCESSING_FAILURE, f"Item is {exc.extra.get('current_status', 'not scheduled')}"), None
    except Conflict:
        return _failure(DUPLICATE_INSTANCE, "MPPS instance already exists"), None
    except Exception:
        logger.exception("dicom n-create failed")
        return _failure(PROCESSING_FAILURE, "Processing failure"), None
    finally:
        close_old_connections()
    logger.info("dicom mpps started", extra={"calling_ae": caller.ae_title, "accession_number": accession})
    return SUCCESS, _created(event)


def handle_n_set(event: Any) -> tuple[int | Dataset, Dataset | None]:
    """COMPLETED or DISCONTINUED finishes the step's item; IN PROGRESS (an update of other attributes) is
    accepted and changes nothing here."""
    try:
        caller = _caller(event)
        uid = str(event.request.RequestedSOPInstanceUID or "")
        changes = event.modification_list
        if caller is None:
            return _failure(PROCESSING_FAILURE, "Calling AE no longer allowed"), None
        status = str(changes.get("PerformedProcedureStepStatus", "") or "")
        if status not in ("", "IN PROGRESS", "COMPLETED", "DISCONTINUED"):
            return _failure(INVALID_ATTRIBUTE_VALUE, "Unknown performed procedure step status"), None
        if status in ("COMPLETED", "DISCONTINUED"):
            imaging_procedure_finish(branch_id=caller.branch_id, mpps_instance_uid=uid, completed=status == "COMPLETED")
    except NotFound:
        return _failure(NO_SUCH_INSTANCE, "No such MPPS instance"), None
    except InvalidState:
        return _failure(PROCESSING_FAILURE, "MPPS may no longer be updated", MPPS_NOT_UPDATABLE), None
    except Exception:
        logger.exception("dicom n-set failed")
        return _failure(PROCESSING_FAILURE, "Processing failure"), None
    finally:
        close_old_connections()
    logger.info("dicom mpps set", extra={"calling_ae": caller.ae_title, "mpps_status": status or "unchanged"})
    answer = Dataset()
    answer.update(changes)
    return SUCCESS, answer


def handlers(admission: Admission) -> list[Any]:
    return [(evt.EVT_REQUESTED, handle_requested, [admission]), *HANDLERS]


HANDLERS: list[Any] = [
    (evt.EVT_RELEASED, handle_association_end),
    (evt.EVT_ABORTED, handle_association_end),
    (evt.EVT_C_ECHO, handle_echo),
    (evt.EVT_C_FIND, handle_find),
    (evt.EVT_N_CREATE, handle_n_create),
    (evt.EVT_N_SET, handle_n_set),
]


def _library_settings() -> None:
    """pynetdicom's own logging, off: its standard handlers format every PDU and DIMSE message, and it renders
    every request and response identifier (pretty_dataset) for a debug line, whatever the log level, so a
    worklist of 70 items was formatted 70 times for nothing; those lines would also carry patient names. Our
    handlers log what happened, by ids. Set before the AE exists (handlers are bound per association).

    pydicom's value validation, off in this process: by default it only warns (it never refuses nor fixes a
    value), and it ran a regular expression over every element of every command pynetdicom encodes. What a
    modality sends is checked by worklist.query_from_identifier; what we answer is built to fit its VRs."""
    _config.LOG_HANDLER_LEVEL = "none"
    _config.LOG_REQUEST_IDENTIFIERS = False
    _config.LOG_RESPONSE_IDENTIFIERS = False
    pydicom_config.settings.reading_validation_mode = pydicom_config.IGNORE
    pydicom_config.settings.writing_validation_mode = pydicom_config.IGNORE


_library_encode = pynetdicom_service_class.encode
_COMMANDS_KEPT = 4096
_encoded_commands: dict[tuple[Any, ...], bytes | None] = {}


def _answer_encode(ds: Dataset, is_implicit_vr: bool, is_little_endian: bool, deflated: bool = False) -> bytes | None:
    """pynetdicom's encode() for the identifiers its C-FIND service sends: our answers (EncodedAnswer) in little
    endian are written by integrations.dicom.encoding; everything else as pynetdicom does."""
    if isinstance(ds, EncodedAnswer):
        if is_little_endian and not deflated:
            return ds.encoded(explicit_vr=not is_implicit_vr)
        ds = ds.dataset()
    return _library_encode(ds, is_implicit_vr, is_little_endian, deflated)


def _command_encode(ds: Dataset, is_implicit_vr: bool, is_little_endian: bool, deflated: bool = False) -> bytes | None:
    """pynetdicom's encode() for DIMSE command sets, remembered by content: it encodes every response's command
    set twice (once for its group length), and the pending responses of one C-FIND are the same few elements
    each time (message id, status), so a day list of 70 answers encoded 140 identical command sets. The
    same elements always encode to the same bytes; a value that cannot be a key goes to pydicom."""
    try:
        key = (is_implicit_vr, is_little_endian, deflated, *((e.tag, e.VR, e.value) for e in ds.elements()))
        hash(key)
    except TypeError:
        return _library_encode(ds, is_implicit_vr, is_little_endian, deflated)
    if key not in _encoded_commands:
        if len(_encoded_commands) >= _COMMANDS_KEPT:
            _encoded_commands.clear()  # message ids grow without end: keep only a recent set
        _encoded_commands[key] = _library_encode(ds, is_implicit_vr, is_little_endian, deflated)
    return _encoded_commands[key]


def _encoding_install() -> None:
    """pynetdicom encodes a C-FIND handler's identifiers, and every command set, with the `encode` its
    service_class and dimse_messages modules imported; those names are the only hooks there are (a handler
    cannot hand it bytes). Replaced once, before serving; what they do not recognise is encoded as before."""
    if getattr(pynetdicom_service_class, "encode", None) is not _answer_encode:
        pynetdicom_service_class.encode = _answer_encode
    if getattr(pynetdicom_dimse_messages, "encode", None) is not _command_encode:
        pynetdicom_dimse_messages.encode = _command_encode


def worklist_limits() -> Limits:
    return Limits(
        artim_seconds=settings.DICOM_ARTIM_TIMEOUT_SECONDS,
        idle_seconds=settings.DICOM_IDLE_TIMEOUT_SECONDS,
        per_address=settings.DICOM_MAX_ASSOCIATIONS_PER_ADDRESS,
        total=settings.DICOM_MAX_ASSOCIATIONS,
    )


def worklist_ae(ae_title: str) -> AE:
    _library_settings()
    _encoding_install()
    ae = AE(ae_title=ae_title)
    for context in (VERIFICATION, MODALITY_WORKLIST_FIND, MODALITY_PERFORMED_PROCEDURE_STEP):
        ae.add_supported_context(context)
    # ACSE: the ARTIM timer (waiting for a request, a release response, the peer's close after a rejection);
    # network: an established association silent this long is aborted; DIMSE: waiting inside a message.
    ae.acse_timeout = settings.DICOM_ARTIM_TIMEOUT_SECONDS
    ae.network_timeout = settings.DICOM_IDLE_TIMEOUT_SECONDS
    ae.dimse_timeout = settings.DICOM_TIMEOUT_SECONDS
    # pynetdicom counts every socket's thread as an association; the admission counts admitted requests only
    # (handle_requested), so its own count must never bind first.
    ae.maximum_associations = 1_000_000
    ae.require_called_aet = True  # handle_requested answers first; this is pynetdicom's own check behind it
    return ae


def worklist_serve(*, host: str, port: int, ae_title: str | None = None) -> WorklistServer:
    """Start serving on (host, port) in a thread as `ae_title` (the DICOM_AE_TITLE setting when None); the
    returned server's shutdown() stops it."""
    ae = worklist_ae(ae_title or settings.DICOM_AE_TITLE)
    admission = Admission(worklist_limits())
    server = ae.make_server(
        (host, port), evt_handlers=handlers(admission), server_class=WorklistServer, admission=admission
    )
    threading.Thread(target=server.serve_forever, name="dicom-worklist-acceptor", daemon=True).start()
    ae._servers.append(server)  # as AE.start_server does: the server's shutdown() removes itself from there
    return cast(WorklistServer, server)
