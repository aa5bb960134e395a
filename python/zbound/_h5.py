"""Registration of the bundled HDF5 plugin with h5py's HDF5 (as hdf5plugin does for its filters)."""
import ctypes
import os

from ._filter import FILTER_ID

_HERE = os.path.dirname(os.path.abspath(__file__))
PLUGIN_PATH = os.path.join(_HERE, "plugin")
PLUGIN_FILE = os.path.join(PLUGIN_PATH, "libh5z_zbound.so")

_plugin = None  # the loaded plugin (kept: HDF5 holds pointers into it)


def _h5py_hdf5_library():
    """Path of the libhdf5 that h5py loaded (its wheel's copy, or the system one), from /proc/self/maps."""
    import h5py
    h5py_dir = os.path.dirname(os.path.dirname(os.path.abspath(h5py.__file__)))
    found = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rsplit(None, 1)[-1] if "/" in line else ""
                base = os.path.basename(path)
                if base.startswith("libhdf5") and "_hl" not in base and path not in found:
                    found.append(path)
    except OSError:
        return None
    mine = [p for p in found if p.startswith(h5py_dir)]
    if mine:
        return mine[0]
    return found[0] if len(found) == 1 else None


def register_h5py(force=True):
    """Registers the bundled plugin with h5py's HDF5 (H5Zregister with the plugin's H5PLget_plugin_info), so that
    h5py reads and writes zbound datasets without HDF5_PLUGIN_PATH. Called on `import zbound`. Returns True when
    the filter is available afterwards. The plugin resolves the HDF5 API from the library that calls it; for this
    one call from Python, ZBOUND_HDF5_LIBRARY is pointed at h5py's libhdf5 (unless the user set it)."""
    global _plugin
    import h5py

    if not os.path.isfile(PLUGIN_FILE):
        return bool(h5py.h5z.filter_avail(FILTER_ID))
    if _plugin is None:
        _plugin = ctypes.CDLL(PLUGIN_FILE)
        _plugin.H5PLget_plugin_info.restype = ctypes.c_void_p
        _plugin.H5PLget_plugin_info.argtypes = []
    if h5py.h5z.filter_avail(FILTER_ID):
        if not force:
            return True
        try:
            h5py.h5z.unregister_filter(FILTER_ID)
        except Exception:  # in use by an open dataset: keep what is registered
            return True
    saved = os.environ.get("ZBOUND_HDF5_LIBRARY")
    lib = None if saved else _h5py_hdf5_library()
    if lib:
        os.environ["ZBOUND_HDF5_LIBRARY"] = lib
    try:
        info = _plugin.H5PLget_plugin_info()
    finally:
        if lib:
            del os.environ["ZBOUND_HDF5_LIBRARY"]
    h5py.h5z.register_filter(info)
    return bool(h5py.h5z.filter_avail(FILTER_ID))
