"""zbound as a Zarr format 3 codec (name 'zbound', an array-to-bytes codec: the array's serializer).

    z = zarr.create_array(store, shape=a.shape, chunks=(64, 64), dtype=a.dtype,
                          serializer=zbound.ZboundCodec(abs=1e-3), compressors=None)

zarr-python 3 takes numcodecs codecs directly only for format 2 arrays; for format 3 a codec is a subclass of
zarr.abc.codec (zarr wraps a few numcodecs codecs itself, in zarr.codecs.numcodecs). This one is registered with
zarr on `import zbound` and through the 'zarr.codecs' entry point, so zarr opens such arrays without an import.
"""
import asyncio
from dataclasses import dataclass

import numpy as np
from zarr.abc.codec import ArrayBytesCodec
from zarr.core.common import parse_named_configuration

from ._api import _mode_and_bound, compress, decompress
from ._filter import probe

CODEC_NAME = "zbound"


@dataclass(frozen=True)
class ZboundCodec(ArrayBytesCodec):
    """Error-bounded lossy serializer for float32/float64 zarr v3 arrays: exactly one of abs= / rel= (relative to
    each chunk's finite value range) / pw_rel= (|x - x'| <= pw_rel * |x| on every value)."""

    is_fixed_size = False

    mode: str
    bound: float
    predictor: str
    encoder: str

    def __init__(self, *, abs=None, rel=None, pw_rel=None, predictor="auto", encoder="auto"):
        mode, bound = _mode_and_bound(abs, rel, pw_rel)
        probe(mode, bound, predictor, encoder)
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "bound", bound)
        object.__setattr__(self, "predictor", predictor)
        object.__setattr__(self, "encoder", encoder)

    @classmethod
    def from_dict(cls, data):
        _, cfg = parse_named_configuration(data, CODEC_NAME)
        cfg = dict(cfg or {})
        mode, bound = cfg.pop("mode"), cfg.pop("bound")
        return cls(**{mode: bound}, **cfg)

    def to_dict(self):
        return {"name": CODEC_NAME, "configuration": {"mode": self.mode, "bound": self.bound,
                                                        "predictor": self.predictor, "encoder": self.encoder}}

    def validate(self, *, shape, dtype, chunk_grid):
        np_dtype = np.dtype(dtype.to_native_dtype())
        if np_dtype.kind != "f" or np_dtype.itemsize not in (4, 8):
            raise TypeError(f"the zbound codec compresses float32/float64 arrays only, not {np_dtype}")

    def _encode_sync(self, chunk_array, chunk_spec):
        a = np.ascontiguousarray(chunk_array.as_numpy_array())
        return chunk_spec.prototype.buffer.from_bytes(
            compress(a, **{self.mode: self.bound}, predictor=self.predictor, encoder=self.encoder))

    def _decode_sync(self, chunk_bytes, chunk_spec):
        raw = chunk_bytes.as_numpy_array().view(np.uint8)
        dtype = np.dtype(chunk_spec.dtype.to_native_dtype())
        out = decompress(raw, shape=chunk_spec.shape)
        if out.dtype != dtype:
            raise ValueError(f"zbound chunk holds {out.dtype} values but the array is {dtype}")
        return chunk_spec.prototype.nd_buffer.from_numpy_array(out)

    async def _encode_single(self, chunk_array, chunk_spec):
        return await asyncio.to_thread(self._encode_sync, chunk_array, chunk_spec)

    async def _decode_single(self, chunk_bytes, chunk_spec):
        return await asyncio.to_thread(self._decode_sync, chunk_bytes, chunk_spec)

    def compute_encoded_size(self, input_byte_length, chunk_spec):
        raise NotImplementedError


def register_zarr():
    from zarr.registry import register_codec
    register_codec(CODEC_NAME, ZboundCodec)
