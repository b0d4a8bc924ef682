from strand.v1 import common_pb2 as _common_pb2
from strand.v1 import groups_pb2 as _groups_pb2
from strand.v1 import security_pb2 as _security_pb2
from strand.v1 import storage_pb2 as _storage_pb2
from strand.v1 import transactions_pb2 as _transactions_pb2
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor
