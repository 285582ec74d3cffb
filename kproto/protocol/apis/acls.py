"""Access control lists (KIP-140 and KIP-290's prefixed patterns): DescribeAcls,
CreateAcls, DeleteAcls.

An ACL binds a resource pattern (type, name, pattern type) to an access
control entry (principal, host, operation, permission). The codes are Java's
``ResourceType``, ``PatternType``, ``AclOperation`` and ``AclPermissionType``
(kproto.admin_acls names them); a filter's 1 means "any" (3 "match" for the
pattern type), null a name, principal or host that matches any.
"""

from ..schema import Api

__all__ = ["DESCRIBE_ACLS", "CREATE_ACLS", "DELETE_ACLS"]


DESCRIBE_ACLS = Api(29, "DescribeAcls", "0-3", flexible="2+", request="""
    resource_type_filter             int8      0+
    resource_name_filter             string    0+     null
    pattern_type_filter              int8      1+     default=3
    principal_filter                 string    0+     null
    host_filter                      string    0+     null
    operation                        int8      0+
    permission_type                  int8      0+
""", response="""
    throttle_time_ms                 int32     0+
    error_code                       int16     0+
    error_message                    string    0+     null
    resources                        []        0+
      resource_type                  int8      0+
      resource_name                  string    0+
      pattern_type                   int8      1+     default=3
      acls                           []        0+
        principal                    string    0+
        host                         string    0+
        operation                    int8      0+
        permission_type              int8      0+
""")

CREATE_ACLS = Api(30, "CreateAcls", "0-3", flexible="2+", request="""
    creations                        []        0+
      resource_type                  int8      0+
      resource_name                  string    0+
      resource_pattern_type          int8      1+     default=3
      principal                      string    0+
      host                           string    0+
      operation                      int8      0+
      permission_type                int8      0+
""", response="""
    throttle_time_ms                 int32     0+
    # One result per creation, in the request's order.
    results                          []        0+
      error_code                     int16     0+
      error_message                  string    0+     null
""")

DELETE_ACLS = Api(31, "DeleteAcls", "0-3", flexible="2+", request="""
    filters                          []        0+
      resource_type_filter           int8      0+
      resource_name_filter           string    0+     null
      pattern_type_filter            int8      1+     default=3
      principal_filter               string    0+     null
      host_filter                    string    0+     null
      operation                      int8      0+
      permission_type                int8      0+
""", response="""
    throttle_time_ms                 int32     0+
    # One result per filter, in the request's order: the ACLs it deleted.
    filter_results                   []        0+
      error_code                     int16     0+
      error_message                  string    0+     null
      matching_acls                  []        0+
        error_code                   int16     0+
        error_message                string    0+     null
        resource_type                int8      0+
        resource_name                string    0+
        pattern_type                 int8      1+     default=3
        principal                    string    0+
        host                         string    0+
        operation                    int8      0+
        permission_type              int8      0+
""")
