/*
 * The record walk of storage/record_walk.py in C, because it is the produce hot path.
 *
 * Why: issue 9's full validation walks every record of every client append (Kafka's
 * LogValidator reads each record through DefaultRecord.readFrom). In Python that walk cost
 * about 0.75 us per record, a quarter of one broker's produce throughput; the issue allows 15%.
 * This file is a line-for-line translation of ``storage.record_walk._py_walk_records``, which
 * stays the reference and the fallback when the extension is not built. Both must return the
 * same ``(status, index, pos, last_delta)`` for every input (tests/storage/test_record_walk_accelerator.py
 * checks that with Hypothesis), so the rules below mirror the Python one by one:
 *
 * - reads are bounded by the end of the data, never the record: a field that runs past its
 *   record is caught by the final ``pos != record_end`` check, one past the data is CORRUPT;
 * - varints follow storage.varint: at most 5 bytes (varint) or 10 (varlong), and the value
 *   must fit 32 or 64 bits, otherwise the record is malformed;
 * - a length varint that cannot be read is NEED_MORE when fewer than 5 bytes remain after the
 *   record's start, CORRUPT otherwise;
 * - header keys must be valid UTF-8 (checked with CPython's own strict decoder);
 * - a record's offsetDelta lies in (last_delta, max_delta]: deltas increase and stay within the
 *   batch's lastOffsetDelta, with gaps allowed (a compacted batch keeps its records' offsets).
 *
 * Every read is bounds-checked; positions are 64-bit and only grow by at most 2^31 per field,
 * so no arithmetic can overflow for any buffer Python can hold. The GIL is held throughout
 * (the walk is microseconds per batch and the buffer must not change under it).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* Status codes, indexes into storage.record_walk's tuple of WalkStatus members. */
enum { WALK_DONE = 0, WALK_NEED_MORE = 1, WALK_CORRUPT = 2, WALK_TOO_LARGE = 3 };

#define MAX_VARINT_BYTES 5  /* storage.varint.MAX_VARINT_BYTES */
#define MAX_VARLONG_BYTES 10  /* storage.varint.MAX_VARLONG_BYTES */

/*
 * Read a zig-zag varint of at most ``max_bytes`` bytes whose value fits ``bits`` bits, from
 * ``*pos``; on success store the decoded value, advance ``*pos`` and return 1. Return 0 when a
 * byte lies at or past ``end``, the varint is too long or its value overflows.
 */
static inline int
read_varint(const uint8_t *data, int64_t end, int64_t *pos, int max_bytes, int bits,
            int64_t *value)
{
    uint64_t unsigned_value = 0;
    int64_t p = *pos;
    for (int i = 0; i < max_bytes; i++) {
        if (p < 0 || p >= end) {
            return 0;
        }
        uint8_t b = data[p++];
        int shift = 7 * i;
        uint64_t part = (uint64_t)(b & 0x7F);
        if (b < 0x80) {
            /* The value must fit ``bits``: only the last allowed byte can carry too much. */
            if (shift + 7 > bits && (part >> (bits - shift)) != 0) {
                return 0;
            }
            unsigned_value |= part << shift;
            *value = (int64_t)(unsigned_value >> 1) ^ -(int64_t)(unsigned_value & 1);
            *pos = p;
            return 1;
        }
        unsigned_value |= part << shift;
    }
    return 0; /* the continue bit on the last allowed byte: too long */
}

/* True when ``data[0:size]`` is UTF-8 that CPython's strict decoder accepts. */
static int
is_utf8(const uint8_t *data, int64_t size)
{
    int64_t i = 0;
    while (i < size && data[i] < 0x80) {
        i++;
    }
    if (i == size) {
        return 1;
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)data, (Py_ssize_t)size, "strict");
    if (text == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(text);
    return 1;
}

/* Past the headers at ``*pos`` (``_walk_headers``); 0 at any surprise. */
static int
walk_headers(const uint8_t *data, int64_t end, int64_t *pos, int64_t record_end)
{
    int64_t p = *pos;
    int64_t count;
    int64_t size;
    if (!read_varint(data, end, &p, MAX_VARINT_BYTES, 32, &count)) {
        return 0;
    }
    if (count < 0 || count * 2 > record_end - p) {
        return 0;
    }
    for (int64_t i = 0; i < count; i++) {
        if (!read_varint(data, end, &p, MAX_VARINT_BYTES, 32, &size)) {
            return 0;
        }
        if (size < 0 || p + size > record_end) {
            return 0;
        }
        if (!is_utf8(data + p, size)) {
            return 0;
        }
        p += size;
        if (!read_varint(data, end, &p, MAX_VARINT_BYTES, 32, &size)) {
            return 0;
        }
        if (size < -1 || p + size > record_end) {
            return 0;
        }
        if (size > 0) {
            p += size;
        }
    }
    *pos = p;
    return 1;
}

/* The walk over a held buffer; see ``storage.record_walk._py_walk_records``. */
static int
walk(const uint8_t *data, int64_t end, int64_t *pos_io, int64_t *index_io, int64_t stop,
     int64_t max_record_bytes, int64_t *last_delta_io, int64_t max_delta)
{
    int64_t pos = *pos_io;
    int64_t index = *index_io;
    int64_t last_delta = *last_delta_io;
    int status = WALK_DONE;
    while (index < stop) {
        int64_t start = pos;
        int64_t length;
        int64_t value;
        if (!read_varint(data, end, &pos, MAX_VARINT_BYTES, 32, &length)) {
            status = end - start < MAX_VARINT_BYTES ? WALK_NEED_MORE : WALK_CORRUPT;
            pos = start;
            break;
        }
        if (length < 1) {
            status = WALK_CORRUPT;
            pos = start;
            break;
        }
        if (length > max_record_bytes) {
            status = WALK_TOO_LARGE;
            pos = start;
            break;
        }
        int64_t record_end = pos + length;
        if (record_end > end) {
            status = WALK_NEED_MORE;
            pos = start;
            break;
        }
        /* attributes (one byte, unused in v2), then timestampDelta: only its shape matters. */
        pos += 1;
        int64_t offset_delta = 0;
        int ok = read_varint(data, end, &pos, MAX_VARLONG_BYTES, 64, &value)
                 /* offsetDelta in (last_delta, max_delta] */
                 && read_varint(data, end, &pos, MAX_VARINT_BYTES, 32, &offset_delta)
                 && offset_delta > last_delta && offset_delta <= max_delta;
        /* keyLength + key, valueLength + value; -1 is null */
        for (int field = 0; ok && field < 2; field++) {
            ok = read_varint(data, end, &pos, MAX_VARINT_BYTES, 32, &value) && value >= -1;
            if (ok && value > 0) {
                pos += value;
            }
        }
        if (ok) {
            if (pos < 0 || pos >= end) {
                ok = 0;
            }
            else if (data[pos] == 0) { /* headersCount 0: the common case */
                pos += 1;
            }
            else {
                ok = walk_headers(data, end, &pos, record_end);
            }
        }
        if (!ok || pos != record_end) {
            status = WALK_CORRUPT;
            pos = start;
            break;
        }
        index += 1;
        last_delta = offset_delta;
    }
    *pos_io = pos;
    *index_io = index;
    *last_delta_io = last_delta;
    return status;
}

PyDoc_STRVAR(walk_batch_records_doc,
             "walk_batch_records(data, pos, index, stop, max_record_bytes, last_delta, max_delta)\n"
             "-> (status_code, index, pos, last_delta)\n"
             "\n"
             "storage.record_walk's walk in C; status_code indexes (DONE, NEED_MORE, CORRUPT,\n"
             "TOO_LARGE). data is any contiguous buffer of bytes; pos and index must be\n"
             "non-negative and last_delta at least -1 (ValueError otherwise).");

static PyObject *
walk_batch_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "walk_batch_records takes exactly 7 arguments");
        return NULL;
    }
    Py_ssize_t numbers[6];
    for (int i = 0; i < 6; i++) {
        numbers[i] = PyLong_AsSsize_t(args[i + 1]);
        if (numbers[i] == -1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    int64_t pos = numbers[0], index = numbers[1], stop = numbers[2];
    int64_t max_record_bytes = numbers[3], last_delta = numbers[4], max_delta = numbers[5];
    /* Python would index from the end for a negative pos; no walk starts below index 0 or
     * below the delta -1 (before the first record). */
    if (pos < 0 || index < 0 || last_delta < -1) {
        PyErr_SetString(PyExc_ValueError, "pos and index must be >= 0, last_delta >= -1");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) != 0) {
        return NULL;
    }
    int status = walk((const uint8_t *)view.buf, (int64_t)view.len, &pos, &index, stop,
                      max_record_bytes, &last_delta, max_delta);
    PyBuffer_Release(&view);
    return Py_BuildValue("(iLLL)", status, (long long)index, (long long)pos,
                         (long long)last_delta);
}

static PyMethodDef methods[] = {
    {"walk_batch_records", (PyCFunction)(void (*)(void))walk_batch_records, METH_FASTCALL,
     walk_batch_records_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "storage._record_walk",
    .m_doc = "The record walk of storage.record_walk, in C for the produce path.",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__record_walk(void)
{
    return PyModuleDef_Init(&module_def);
}
