"""The sizes an attention record's NPZ may have, checked before any array is read: the file itself, then what its
members unpack to and its arrays declare (an NPZ of a few MB can declare gigabytes). AttentionRecord.from_npz runs
these checks, so every reader of record bytes gets them, not only record_files.read_record."""
from __future__ import annotations

import io
import math
import zipfile

import numpy as np

from attnscope.model.budget import over_budget
from attnscope.records.attention import RecordError

MAX_RECORD_BYTES = 50 * 2**20  # the file
MAX_UNPACKED_BYTES = 2**30  # its arrays, as their headers declare them
HEADERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def check_file(data: bytes, name: str) -> None:
    """Refuse a file larger than MAX_RECORD_BYTES."""
    if len(data) > MAX_RECORD_BYTES:
        raise RecordError(f"{name} is larger than {MAX_RECORD_BYTES // 2**20} MB")


def check_unpacked(data: bytes, name: str) -> None:
    """Refuse an NPZ whose members unpack, or whose arrays declare, more than MAX_UNPACKED_BYTES or than the
    machine can spare, reading only the zip's directory and each array's header."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = archive.infolist()
        declared = 0
        for member in members:
            if member.filename.endswith(".npy"):
                with archive.open(member) as f:
                    version = np.lib.format.read_magic(f)
                    if version not in HEADERS:
                        raise RecordError(f"{name} holds {member.filename} in NPY format {version}, which "
                                          "attnscope does not read")
                    shape, _, dtype = HEADERS[version](f)
                declared += math.prod(shape) * dtype.itemsize
    size = max(declared, sum(m.file_size for m in members))
    if size > MAX_UNPACKED_BYTES:
        raise RecordError(f"{name} unpacks to {size / 2**20:,.0f} MB, more than the {MAX_UNPACKED_BYTES // 2**20:,} MB "
                          "a record may hold: nothing was unpacked")
    refused = over_budget(size, f"{name}'s arrays")
    if refused:
        raise RecordError(refused)
