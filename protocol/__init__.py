"""The Kafka wire codec: pure ``bytes ⇄ objects``, no sockets, clocks or threads.

A request travels through it in this order (the broker's network layer drives it):

* ``framing.FrameDecoder`` cuts the byte stream into frames (``socket.request.max.bytes``);
* ``headers.parse_request_header`` reads api key, version, correlation id, client id;
* ``apis.request_disposition`` decides: serve, answer UNSUPPORTED_VERSION (``unsupported``), or
  close where no answer can be encoded;
* the body codec: ``produce`` and ``fetch`` (hand-written, zero-copy records), everything else
  through ``apis.decode_request`` / ``apis.encode_response`` (kafka-python's generated classes);
* ``framing.frame_response`` puts size and response header in front of the body ``Segments``.

``fetch_client`` is the client side of the hand-written Fetch codec (its inverse, so the codec
round-trips on its own in tests); the replica fetcher still speaks Fetch through kafka-python
(``fetcher/leader_codecs.py``). Every decoding failure is a
``errors.ProtocolError``: the connection it came from is closed, nothing else is affected.
"""
