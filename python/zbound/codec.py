"""zbound as a numcodecs codec (id 'zbound'): zarr v2 arrays (compressor=...), Dask, and anything else that takes a
numcodecs codec. Registered with numcodecs on `import zbound` and through the 'numcodecs.codecs' entry point."""
import numpy as np
from numcodecs.abc import Codec
from numcodecs.compat import ensure_contiguous_ndarray, ndarray_copy

from ._api import _mode_and_bound, compress, decompress
from ._filter import probe


class Zbound(Codec):
    """Error-bounded lossy codec for float32/float64 chunks.

        zbound.Zbound(abs=1e-3)       every value within 1e-3
        zbound.Zbound(rel=1e-4)       within 1e-4 * (max - min) of each chunk's finite values

    Exactly one of abs/rel/pw_rel (pw_rel: |x - x'| <= pw_rel * |x| on every value). A decoded chunk has the chunk's values in C order; zarr gives it its shape. In a zarr v2 array
    use it as the compressor (zarr hands it the chunk as an array of its dtype); in a zarr v3 array use
    zbound.ZboundCodec (an array-to-bytes codec) as the serializer.
    """

    codec_id = "zbound"

    def __init__(self, abs=None, rel=None, pw_rel=None, predictor="auto", encoder="auto", fill=None):
        mode, bound = _mode_and_bound(abs, rel, pw_rel)
        probe(mode, bound, predictor, encoder)
        self.abs, self.rel, self.pw_rel = abs, rel, pw_rel
        self.predictor, self.encoder, self.fill = predictor, encoder, fill
        self._kw = {mode: bound, "predictor": predictor, "encoder": encoder}

    def encode(self, buf):
        a = buf if isinstance(buf, np.ndarray) else ensure_contiguous_ndarray(buf)
        if a.dtype.kind != "f" or a.dtype.itemsize not in (4, 8):
            raise TypeError(f"zbound codec: float32/float64 chunks only, got {a.dtype} (zarr v2: use it as the "
                            f"compressor of a float array, with no filter that changes the dtype)")
        return compress(a, fill=self.fill, **self._kw)

    def decode(self, buf, out=None):
        data = ensure_contiguous_ndarray(buf).view(np.uint8)
        dec = decompress(data)
        if out is not None:
            return ndarray_copy(dec.reshape(-1), out)
        return dec.reshape(-1)

    def get_config(self):
        cfg = {"id": self.codec_id}
        for k in ("abs", "rel", "pw_rel"):
            if getattr(self, k) is not None:
                cfg[k] = float(getattr(self, k))
        cfg["predictor"], cfg["encoder"] = self.predictor, self.encoder
        if self.fill is not None:
            cfg["fill"] = float(self.fill)
        return cfg

    def __repr__(self):
        cfg = self.get_config()
        cfg.pop("id")
        return "Zbound(" + ", ".join(f"{k}={v!r}" for k, v in cfg.items()) + ")"


def register_numcodecs():
    from numcodecs.registry import register_codec
    register_codec(Zbound)
