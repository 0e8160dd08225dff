"""Names `vulture mcd` reports that are used where it cannot look (run by `make test`).

Not code: vulture only reads the names. Anything else it reports is dead and goes.
"""

# the crash hook only tests install (tests/killing.py)
install

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
