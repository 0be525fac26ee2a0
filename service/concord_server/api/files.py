"""concord.files.v1.FileService: validates requests, calls primitives.files, maps errors."""

from __future__ import annotations

from collections.abc import AsyncIterator

from concord.files.v1 import files_pb2 as pb
from concord.files.v1 import files_pb2_grpc

from ..errors import InvalidArgument
from ..primitives.files import Files, parse_file_id
from . import validation as v
from .convert import timestamp
from .status import check_decoded, rpc

_STATES = {"uploading": pb.FILE_STATE_UPLOADING, "complete": pb.FILE_STATE_COMPLETE}


def _file_id(value: str) -> str:
    v.label(value, "file_id")
    parse_file_id(value)
    return value


async def _data(requests) -> AsyncIterator[bytes]:
    async for request in requests:
        check_decoded(request)
        if request.WhichOneof("kind") != "data":
            raise InvalidArgument("only the first Upload message may be the header", field="header")
        yield request.data


class FileServicer(files_pb2_grpc.FileServiceServicer):
    def __init__(self, files: Files) -> None:
        self._files = files

    @rpc
    async def Upload(self, request_iterator, context) -> pb.UploadResponse:
        first = await anext(request_iterator, None)
        check_decoded(first)
        if first is None or first.WhichOneof("kind") != "header":
            raise InvalidArgument("the first Upload message must be the header", field="header")
        h = first.header
        group, sender, name = v.name(h.group, "group"), v.name(h.sender, "sender"), v.name(h.name, "name")
        done = await self._files.upload(group, sender, name, _data(request_iterator))
        return pb.UploadResponse(file_id=done.file_id, size=done.size, gzip=done.gzip, message_id=done.message_id)

    @rpc
    async def Download(self, request: pb.DownloadRequest, context) -> AsyncIterator[pb.DownloadResponse]:
        fid = _file_id(request.file_id)
        worker = v.name(request.worker, "worker") if request.worker else ""
        if not request.lines:
            async for data, offset in self._files.chunks(fid, request.from_offset, worker):
                yield pb.DownloadResponse(data=data, offset=offset)
            return
        async for batch in self._files.lines(fid, request.from_offset, worker):
            yield pb.DownloadResponse(lines=[line for line, _ in batch], line_ends=[end for _, end in batch],
                                      offset=batch[-1][1])

    @rpc
    async def MarkDone(self, request: pb.MarkDoneRequest, context) -> pb.MarkDoneResponse:
        deleted = await self._files.mark_done(_file_id(request.file_id), v.name(request.worker, "worker"))
        return pb.MarkDoneResponse(deleted=deleted)

    @rpc
    async def ListFiles(self, request: pb.ListFilesRequest, context) -> pb.ListFilesResponse:
        files, held = await self._files.list(v.name(request.group, "group"))
        return pb.ListFilesResponse(held_bytes=held, bound_bytes=self._files.bound, files=[
            pb.FileInfo(file_id=f.file_id, name=f.name, size=f.size, state=_STATES[f.state], gzip=f.gzip,
                        pending=f.pending, created_at=timestamp(f.created_ms),
                        downloads=[pb.DownloadProgress(worker=d.worker, offset=d.offset, lines=d.lines,
                                                       updated_at=timestamp(d.updated_ms)) for d in f.downloads])
            for f in files])

    @rpc
    async def ListFileGroups(self, request: pb.ListFileGroupsRequest, context) -> pb.ListFileGroupsResponse:
        found, next_token = await self._files.summaries(*v.page(request.page_token, request.page_size))
        return pb.ListFileGroupsResponse(next_page_token=next_token, groups=[
            pb.FileGroupSummary(group=g.group, files=g.files, held_bytes=g.held_bytes, bound_bytes=g.bound_bytes)
            for g in found])

    @rpc
    async def Finish(self, request: pb.FinishRequest, context) -> pb.FinishResponse:
        message_id = await self._files.finish(v.name(request.group, "group"), v.name(request.sender, "sender"))
        return pb.FinishResponse(message_id=message_id)
