"""Names `vulture mcd` reports that are used where it cannot look (run by `make test`).

Not code: vulture only reads the names. Anything else it reports is dead and goes.
"""

# the crash hook only tests install (tests/killing.py)
install

# mcd.config.parser: the caller-owned parser that validates only what changed (bench/plan.py,
# tests/unit/test_parser.py; for the agent's syncs)
Parser


# the reboot failure count the cluster agent's metric (mcd_reboots_failed_total) reads
failed_reboots
_.failed_reboots

# fields of records parsed whole from outside formats; compared, printed or read by the tests
luks  # IgnitionConfig: a canonical storage section the reconcile check compares
ORIGINAL_OS_IMAGE_ANNOTATION  # upstream's annotation name, recognised in MachineConfig metadata
base_os_extensions_container_image  # MachineConfig spec field
revert_from_ocl  # ConfigDiff: upstream's machineConfigDiff flag
shell  # /etc/passwd entry
osname  # rpm-ostree status deployment fields (spec §5.2) ...
pinned
serial
timestamp
container_image_reference_digest
requested_local_packages
requested_local_fileoverride_packages
requested_base_local_replacements
_.base_commit  # ... and the base commit it implies
matched  # policy Decision: whether a policy entry matched (else the default Reboot)

# result records of the unit writer that rollback uses (tests read every field)
disabled_before_write
disabled
_.files_changed

# step fields: printed through dataclasses.fields() (`mcd plan -o json`, the start summary)
role

# the cluster agent
truncate  # mcd.node.annotations: upstream's truncate helper, pinned by its case table (misc.json)
_.retries  # kubernetes.client.Configuration fields the agent's client sets
_.user_agent
_.config_drift  # the mcd_config_drift gauge, set by the drift monitor
_.daemon_threads  # http.server attributes and handler hooks of the metrics endpoint
do_GET
log_message
handle_error  # socketserver's hook: the TLS metrics endpoint logs a failed handshake at DEBUG
_.secure_port  # the TLS metrics endpoint's bound port and whether it made its certificate (tests)
_.self_signed
FIRST_PIVOT_CONFIG  # upstream key the first start copies from node-annotations.json; the tests read it

# the long-running child of `mcd-sim simulate` (the agent process); sim/mcd_sim is not read by vulture
spawn

# the watchers
_.drifted  # what the drift reporter holds, and what the monitor watches:
_.watched_dirs  # introspection the drift tests assert on
_.snapshot  # ParsedSnapshot: the snapshot a parse came from (checksum, target), kept with it
_._get_errno_func  # pyinotify internals set on its objects (our libc, no ldconfig fork)
_._ignore_events
_._exclude_filter
_._wmd
_._inotify_wrapper

# mcd.render.goyaml: PyYAML's Emitter calls these overrides and reads these attributes
write_plain
write_single_quoted
write_double_quoted
write_literal
_.open_ended
_.allow_flow_plain
_.allow_block_plain
_.allow_single_quoted
_.allow_block

# the pool controller's figures the tests read: keys its worker handled (tests/controller/
# test_watches.py), when a refused eviction may be retried (tests/controller/test_drain_health.py)
_.handled
_.next_retry

# mcd.config.record: what Python reads of the methods and classes it makes (defaults,
# annotations, docstrings of the namedtuples made without typing, the record's own fields)
_.__defaults__
_.__annotations__
_.__doc__
_.__record_fields__
