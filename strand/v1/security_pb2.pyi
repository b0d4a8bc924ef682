from strand.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SaslAuthenticateRequest(_message.Message):
    __slots__ = ("mechanism", "exchange_id", "auth_bytes")
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    EXCHANGE_ID_FIELD_NUMBER: _ClassVar[int]
    AUTH_BYTES_FIELD_NUMBER: _ClassVar[int]
    mechanism: str
    exchange_id: str
    auth_bytes: bytes
    def __init__(self, mechanism: _Optional[str] = ..., exchange_id: _Optional[str] = ..., auth_bytes: _Optional[bytes] = ...) -> None: ...

class SaslAuthenticateResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "exchange_id", "auth_bytes", "session_token", "session_lifetime_ms")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    EXCHANGE_ID_FIELD_NUMBER: _ClassVar[int]
    AUTH_BYTES_FIELD_NUMBER: _ClassVar[int]
    SESSION_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSION_LIFETIME_MS_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    exchange_id: str
    auth_bytes: bytes
    session_token: str
    session_lifetime_ms: int
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., exchange_id: _Optional[str] = ..., auth_bytes: _Optional[bytes] = ..., session_token: _Optional[str] = ..., session_lifetime_ms: _Optional[int] = ...) -> None: ...

class AclEntry(_message.Message):
    __slots__ = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str
    def __init__(self, resource_type: _Optional[str] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[str] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[str] = ..., permission: _Optional[str] = ...) -> None: ...

class AclResult(_message.Message):
    __slots__ = ("error_code", "error_message")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class CreateAclsRequest(_message.Message):
    __slots__ = ("creations",)
    CREATIONS_FIELD_NUMBER: _ClassVar[int]
    creations: _containers.RepeatedCompositeFieldContainer[AclEntry]
    def __init__(self, creations: _Optional[_Iterable[_Union[AclEntry, _Mapping]]] = ...) -> None: ...

class CreateAclsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AclResult]
    def __init__(self, results: _Optional[_Iterable[_Union[AclResult, _Mapping]]] = ...) -> None: ...

class DescribeAclsRequest(_message.Message):
    __slots__ = ("filter",)
    FILTER_FIELD_NUMBER: _ClassVar[int]
    filter: AclEntry
    def __init__(self, filter: _Optional[_Union[AclEntry, _Mapping]] = ...) -> None: ...

class DescribeAclsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "acls")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACLS_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    acls: _containers.RepeatedCompositeFieldContainer[AclEntry]
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., acls: _Optional[_Iterable[_Union[AclEntry, _Mapping]]] = ...) -> None: ...

class DeleteAclsRequest(_message.Message):
    __slots__ = ("filters",)
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    filters: _containers.RepeatedCompositeFieldContainer[AclEntry]
    def __init__(self, filters: _Optional[_Iterable[_Union[AclEntry, _Mapping]]] = ...) -> None: ...

class DeleteAclsResponse(_message.Message):
    __slots__ = ("results",)
    class FilterResult(_message.Message):
        __slots__ = ("error_code", "error_message", "deleted")
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        DELETED_FIELD_NUMBER: _ClassVar[int]
        error_code: _common_pb2.ErrorCode
        error_message: str
        deleted: _containers.RepeatedCompositeFieldContainer[AclEntry]
        def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., deleted: _Optional[_Iterable[_Union[AclEntry, _Mapping]]] = ...) -> None: ...
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[DeleteAclsResponse.FilterResult]
    def __init__(self, results: _Optional[_Iterable[_Union[DeleteAclsResponse.FilterResult, _Mapping]]] = ...) -> None: ...

class ScramCredentialUpsertion(_message.Message):
    __slots__ = ("user", "mechanism", "iterations", "salt", "stored_key", "server_key")
    USER_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    SALT_FIELD_NUMBER: _ClassVar[int]
    STORED_KEY_FIELD_NUMBER: _ClassVar[int]
    SERVER_KEY_FIELD_NUMBER: _ClassVar[int]
    user: str
    mechanism: str
    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes
    def __init__(self, user: _Optional[str] = ..., mechanism: _Optional[str] = ..., iterations: _Optional[int] = ..., salt: _Optional[bytes] = ..., stored_key: _Optional[bytes] = ..., server_key: _Optional[bytes] = ...) -> None: ...

class ScramCredentialDeletion(_message.Message):
    __slots__ = ("user", "mechanism")
    USER_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    user: str
    mechanism: str
    def __init__(self, user: _Optional[str] = ..., mechanism: _Optional[str] = ...) -> None: ...

class AlterUserScramCredentialsRequest(_message.Message):
    __slots__ = ("deletions", "upsertions")
    DELETIONS_FIELD_NUMBER: _ClassVar[int]
    UPSERTIONS_FIELD_NUMBER: _ClassVar[int]
    deletions: _containers.RepeatedCompositeFieldContainer[ScramCredentialDeletion]
    upsertions: _containers.RepeatedCompositeFieldContainer[ScramCredentialUpsertion]
    def __init__(self, deletions: _Optional[_Iterable[_Union[ScramCredentialDeletion, _Mapping]]] = ..., upsertions: _Optional[_Iterable[_Union[ScramCredentialUpsertion, _Mapping]]] = ...) -> None: ...

class UserResult(_message.Message):
    __slots__ = ("user", "error_code", "error_message")
    USER_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    user: str
    error_code: _common_pb2.ErrorCode
    error_message: str
    def __init__(self, user: _Optional[str] = ..., error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class AlterUserScramCredentialsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[UserResult]
    def __init__(self, results: _Optional[_Iterable[_Union[UserResult, _Mapping]]] = ...) -> None: ...

class DescribeUserScramCredentialsRequest(_message.Message):
    __slots__ = ("users",)
    USERS_FIELD_NUMBER: _ClassVar[int]
    users: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, users: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribeUserScramCredentialsResponse(_message.Message):
    __slots__ = ("users",)
    class User(_message.Message):
        __slots__ = ("user", "error_code", "error_message", "mechanism", "iterations")
        USER_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        MECHANISM_FIELD_NUMBER: _ClassVar[int]
        ITERATIONS_FIELD_NUMBER: _ClassVar[int]
        user: str
        error_code: _common_pb2.ErrorCode
        error_message: str
        mechanism: str
        iterations: int
        def __init__(self, user: _Optional[str] = ..., error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., mechanism: _Optional[str] = ..., iterations: _Optional[int] = ...) -> None: ...
    USERS_FIELD_NUMBER: _ClassVar[int]
    users: _containers.RepeatedCompositeFieldContainer[DescribeUserScramCredentialsResponse.User]
    def __init__(self, users: _Optional[_Iterable[_Union[DescribeUserScramCredentialsResponse.User, _Mapping]]] = ...) -> None: ...

class QuotaEntityPart(_message.Message):
    __slots__ = ("entity_type", "name", "is_default")
    ENTITY_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    IS_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    entity_type: str
    name: str
    is_default: bool
    def __init__(self, entity_type: _Optional[str] = ..., name: _Optional[str] = ..., is_default: _Optional[bool] = ...) -> None: ...

class QuotaEntity(_message.Message):
    __slots__ = ("parts",)
    PARTS_FIELD_NUMBER: _ClassVar[int]
    parts: _containers.RepeatedCompositeFieldContainer[QuotaEntityPart]
    def __init__(self, parts: _Optional[_Iterable[_Union[QuotaEntityPart, _Mapping]]] = ...) -> None: ...

class QuotaValue(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: float
    def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...

class AlterClientQuotasRequest(_message.Message):
    __slots__ = ("entries", "validate_only")
    class Op(_message.Message):
        __slots__ = ("key", "value", "remove")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        REMOVE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        remove: bool
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ..., remove: _Optional[bool] = ...) -> None: ...
    class Entry(_message.Message):
        __slots__ = ("entity", "ops")
        ENTITY_FIELD_NUMBER: _ClassVar[int]
        OPS_FIELD_NUMBER: _ClassVar[int]
        entity: QuotaEntity
        ops: _containers.RepeatedCompositeFieldContainer[AlterClientQuotasRequest.Op]
        def __init__(self, entity: _Optional[_Union[QuotaEntity, _Mapping]] = ..., ops: _Optional[_Iterable[_Union[AlterClientQuotasRequest.Op, _Mapping]]] = ...) -> None: ...
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[AlterClientQuotasRequest.Entry]
    validate_only: bool
    def __init__(self, entries: _Optional[_Iterable[_Union[AlterClientQuotasRequest.Entry, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class AlterClientQuotasResponse(_message.Message):
    __slots__ = ("entries",)
    class Entry(_message.Message):
        __slots__ = ("entity", "error_code", "error_message")
        ENTITY_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        entity: QuotaEntity
        error_code: _common_pb2.ErrorCode
        error_message: str
        def __init__(self, entity: _Optional[_Union[QuotaEntity, _Mapping]] = ..., error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[AlterClientQuotasResponse.Entry]
    def __init__(self, entries: _Optional[_Iterable[_Union[AlterClientQuotasResponse.Entry, _Mapping]]] = ...) -> None: ...

class DescribeClientQuotasRequest(_message.Message):
    __slots__ = ("components", "strict")
    class Component(_message.Message):
        __slots__ = ("entity_type", "match", "name")
        ENTITY_TYPE_FIELD_NUMBER: _ClassVar[int]
        MATCH_FIELD_NUMBER: _ClassVar[int]
        NAME_FIELD_NUMBER: _ClassVar[int]
        entity_type: str
        match: str
        name: str
        def __init__(self, entity_type: _Optional[str] = ..., match: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    STRICT_FIELD_NUMBER: _ClassVar[int]
    components: _containers.RepeatedCompositeFieldContainer[DescribeClientQuotasRequest.Component]
    strict: bool
    def __init__(self, components: _Optional[_Iterable[_Union[DescribeClientQuotasRequest.Component, _Mapping]]] = ..., strict: _Optional[bool] = ...) -> None: ...

class DescribeClientQuotasResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "entries")
    class Entry(_message.Message):
        __slots__ = ("entity", "values")
        ENTITY_FIELD_NUMBER: _ClassVar[int]
        VALUES_FIELD_NUMBER: _ClassVar[int]
        entity: QuotaEntity
        values: _containers.RepeatedCompositeFieldContainer[QuotaValue]
        def __init__(self, entity: _Optional[_Union[QuotaEntity, _Mapping]] = ..., values: _Optional[_Iterable[_Union[QuotaValue, _Mapping]]] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    entries: _containers.RepeatedCompositeFieldContainer[DescribeClientQuotasResponse.Entry]
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[DescribeClientQuotasResponse.Entry, _Mapping]]] = ...) -> None: ...
