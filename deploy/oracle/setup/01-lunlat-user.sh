#!/bin/bash
# docker-compose profile `oracle`: creates lunlat's monitoring user LUNLAT in FREEPDB1 with
# deploy/oracle/grants.sql, once, right after the database is created.
#
# The Oracle Database Free image runs /opt/oracle/scripts/setup/* after it created the database
# (only then: not on later starts of the same data volume), in name order, as the `oracle` OS user:
# *.sql through `sqlplus / as sysdba` in CDB$ROOT, *.sh *sourced* by its runUserScripts.sh. So
# this script keeps to a subshell (set -e and its variables must not leak into the image's
# script), connects to the PDB itself, and never calls `exit` outside the subshell.
# The password comes from the compose secret, never from this file; it reaches sqlplus on stdin
# through a shell builtin, so it is in no process's argument list. What sqlplus runs, in FREEPDB1:
#   DEFINE lunlat_user = LUNLAT / DEFINE lunlat_password = "<the secret>" / @/opt/lunlat/grants.sql
# (the LUNLAT_SETUP_* variables below exist for tests/oracle/test_deploy.py, which runs this script).
(
  set -euo pipefail
  password_file=${LUNLAT_SETUP_PASSWORD_FILE:-/run/secrets/oracle_lunlat_password}
  grants=${LUNLAT_SETUP_GRANTS:-/opt/lunlat/grants.sql}
  pdb=FREEPDB1  # Oracle Database Free has this one PDB; deploy/oracle/lunlat.yaml connects to it

  fail() {
    echo "lunlat setup: $*; LUNLAT was NOT created (see docs/oracle.md)" >&2
    exit 1
  }

  [ -r "$grants" ] || fail "cannot read $grants"
  [ -r "$password_file" ] || fail "cannot read the password file $password_file"
  # Read as the exporter reads password_file: the whole file less one trailing newline.
  password=$(cat -- "$password_file" && echo x)
  password=${password%x}
  password=${password%$'\n'}
  password=${password%$'\r'}
  [ -n "$password" ] || fail "$password_file is empty"
  case "$password" in
    *[[:space:]\"\&]*) fail "the password in $password_file has blanks, quotes or '&'" ;;
    *[Cc][Hh][Aa][Nn][Gg][Ee][Mm][Ee]*) fail "$password_file still holds the example password" ;;
  esac
  case "${ORACLE_PWD:-}" in
    *[Cc][Hh][Aa][Nn][Gg][Ee][Mm][Ee]*)
      echo "lunlat setup: WARNING: SYS's password is still the example one; change it" >&2 ;;
  esac

  printf '%s\n' \
    'WHENEVER SQLERROR EXIT FAILURE' \
    "ALTER SESSION SET CONTAINER = ${pdb};" \
    'DEFINE lunlat_user = LUNLAT' \
    "DEFINE lunlat_password = \"${password}\"" \
    "@${grants}" \
    'EXIT' |
    sqlplus -s -L / as sysdba || fail "sqlplus failed"
  echo "lunlat setup: created LUNLAT in ${pdb} with ${grants}"
)
