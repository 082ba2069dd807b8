#!/bin/bash
# Creates lunlat's monitoring user in FREEPDB1 once, right after the database is created: the
# Oracle Database Free image runs /opt/oracle/scripts/setup/*.sh (and *.sql) as the oracle user
# after the first start. The password comes from the compose secret, never from this file.
set -euo pipefail
password=$(cat /run/secrets/oracle_lunlat_password)
sqlplus -s / as sysdba <<SQL
WHENEVER SQLERROR EXIT FAILURE
ALTER SESSION SET CONTAINER = FREEPDB1;
DEFINE lunlat_user = LUNLAT
DEFINE lunlat_container = ''
DEFINE lunlat_password = "${password}"
@/opt/lunlat/grants.sql
EXIT
SQL
