#!/bin/bash
# Creates lunlat's monitoring login once SQL Server answers (docker-compose profile `mssql`, service
# mssql-setup). Passwords come from the compose secrets, never from this file or the command line
# of another process: sqlcmd reads SA's from SQLCMDPASSWORD, lunlat's through a scripting variable.
set -euo pipefail
export SQLCMDPASSWORD
SQLCMDPASSWORD=$(cat /run/secrets/mssql_sa_password)
LUNLAT_PASSWORD=$(cat /run/secrets/mssql_lunlat_password)
export LUNLAT_PASSWORD   # sqlcmd takes scripting variables from the environment too
exec /opt/mssql-tools18/bin/sqlcmd -S mssql,1433 -U sa -C -b -i /opt/lunlat/grants.sql
