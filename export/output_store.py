"""The export's output directory on any Hadoop-compatible filesystem, through Spark's JVM.

``export-topic`` writes its Parquet with Spark's writers and keeps its manifest beside them, so
the output may be any URI Spark's Hadoop configuration can open (``file:``, ``hdfs://``,
``s3a://``, ``abfs://``), not only a local directory. This shell is the driver's only access
to it: Hadoop's ``FileSystem`` (listing, rename, delete) and ``FileContext`` (rename with
overwrite, for the manifest) over py4j. A bare path is qualified as Spark qualifies an output
path: against ``fs.defaultFS`` and the driver's working directory.

Renames: a rename is atomic on HDFS and local disks; on object stores it is a copy, so a crash
can leave a copy half-made, which is why every step that renames is idempotent (see
``export.export_topic_job``'s recovery).
"""

from __future__ import annotations

from typing import Any

# Files a listing returns at most: a run writes one file per partition and Spark task.
MAX_LISTED_FILES = 1_000_000


class OutputStore:
    """Names are relative to the root (``"_staging/run-3"``); the root is a qualified URI."""

    def __init__(self, spark: Any, location: str) -> None:
        self._jvm = spark._jvm
        self._conf = spark._jsc.hadoopConfiguration()
        path = self._jvm.org.apache.hadoop.fs.Path(location)
        qualified = path.getFileSystem(self._conf).makeQualified(path)
        # Our own instance (Spark's is cached and shared): it neither writes nor checks the
        # local filesystem's .crc side files, so a manifest restored or edited by hand reads.
        filesystem = self._jvm.org.apache.hadoop.fs.FileSystem
        self._fs = filesystem.newInstance(qualified.toUri(), self._conf)
        self._fs.setVerifyChecksum(False)
        self._fs.setWriteChecksum(False)
        self.uri: str = qualified.toString().rstrip("/")

    def close(self) -> None:
        self._fs.close()

    def _path(self, name: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(f"{self.uri}/{name}" if name else self.uri)

    def location(self, name: str) -> str:
        """The URI of ``name`` (what Spark's reader and writer take)."""
        return str(self._path(name).toString())

    def exists(self, name: str) -> bool:
        return bool(self._fs.exists(self._path(name)))

    def mkdirs(self, name: str = "") -> None:
        self._fs.mkdirs(self._path(name))

    def read_bytes(self, name: str) -> bytes | None:
        """The file's bytes, or None if there is none."""
        path = self._path(name)
        if not self._fs.exists(path):
            return None
        stream = self._fs.open(path)
        try:
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def write_replacing(self, name: str, data: bytes) -> None:
        """Write ``name.tmp`` completely, then rename it over ``name`` (atomic where the
        filesystem's rename is: readers see the old bytes or the new, never a part)."""
        temporary = self._path(f"{name}.tmp")
        stream = self._fs.create(temporary, True)
        try:
            stream.write(bytearray(data))
            stream.hsync()
        finally:
            stream.close()
        context = self._jvm.org.apache.hadoop.fs.FileContext.getFileContext(
            self._fs.getUri(), self._conf
        )
        rename = self._jvm.org.apache.hadoop.fs.Options.Rename
        context.rename(temporary, self._path(name), _java_array(rename, [rename.OVERWRITE]))

    def create_new(self, name: str, data: bytes) -> bool:
        """Create ``name`` holding ``data`` unless it exists; False if it did. Exclusive where
        the filesystem's create-if-absent is (HDFS; a local disk up to a race of a few
        microseconds; an object store only as far as its listing is consistent)."""
        path = self._path(name)
        try:
            stream = self._fs.create(path, False)
        except Exception:  # py4j's Py4JJavaError: FileAlreadyExistsException, or a real error
            if self._fs.exists(path):
                return False
            raise
        try:
            try:
                stream.write(bytearray(data))
                stream.hsync()
            finally:
                stream.close()
        except BaseException:
            # Not left half-written: a file that exists would hold the name for ever.
            self._fs.delete(path, False)
            raise
        return True

    def list_files(self, name: str, suffix: str) -> list[str]:
        """Every file below ``name`` whose name ends with ``suffix``, as names relative to the
        root, sorted; none if ``name`` does not exist."""
        root = self._path(name)
        if not self._fs.exists(root):
            return []
        found = []
        files = self._fs.listFiles(root, True)
        while files.hasNext():
            path = files.next().getPath()
            if path.getName().endswith(suffix):
                found.append(self._relative(str(path.toString())))
            assert len(found) <= MAX_LISTED_FILES, f"more than {MAX_LISTED_FILES} files in {root}"
        return sorted(found)

    def _relative(self, uri: str) -> str:
        qualified = str(self._fs.makeQualified(self._jvm.org.apache.hadoop.fs.Path(uri)).toString())
        assert qualified.startswith(self.uri + "/"), (qualified, self.uri)
        return qualified[len(self.uri) + 1 :]

    def rename(self, source: str, target: str) -> None:
        """Move a file, making the target's directory; a no-op if it already moved."""
        source_path, target_path = self._path(source), self._path(target)
        if not self._fs.exists(source_path) and self._fs.exists(target_path):
            return
        self._fs.mkdirs(target_path.getParent())
        if not self._fs.rename(source_path, target_path):
            raise OSError(f"cannot rename {source_path} to {target_path}")

    def delete(self, name: str) -> None:
        """Delete a file or a directory tree; nothing if absent."""
        self._fs.delete(self._path(name), True)


def _java_array(java_class: Any, values: list[Any]) -> Any:
    """A Java array for a varargs parameter (py4j passes none for us)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    assert gateway is not None, "no SparkContext is running"
    array = gateway.new_array(java_class, len(values))
    for index, value in enumerate(values):
        array[index] = value
    return array
