-- lunlat: a least-privilege PostgreSQL login for the exporter's postgres source.
--
-- Run as a superuser (or a role with CREATEROLE holding pg_read_all_settings WITH ADMIN) with psql,
-- the password from a variable (never in this file or a history):
--   psql -h db1 -U postgres -d postgres -v password="$(cat /run/secrets/lunlat)" -f deploy/postgres/grants.sql
-- Running it again sets the password again and keeps the grant (the role is created only when missing).
--
-- What the exporter reads (exporter/src/lunlat/engines/postgres/sql.py) and what each needs:
--   pg_stat_io, pg_stat_wal, pg_stat_database, pg_tablespace_location(), pg_postmaster_start_time(),
--   the settings track_io_timing, track_wal_io_timing, temp_tablespaces, wal_sync_method
--       nothing: every login may read them (checked on 13-18 by tests/postgres/test_matrix.py);
--   current_setting('data_directory'), where the data directory and pg_wal are (their LUNs)
--       pg_read_all_settings ("Read all configuration variables, even those normally visible only to
--       superusers", https://www.postgresql.org/docs/18/predefined-roles.html). pg_monitor includes it
--       and works too; it grants more (pg_read_all_stats, pg_stat_scan_tables).
-- Nothing else: no superuser, no table of any database.
--
-- Without it the data_directory query fails with SQLSTATE 42501; the exporter turns that query off
-- (asked again at its next session or config reload, else after 60 s doubling up to ten minutes),
-- counts lunlat_source_errors_total{reason="no_grant"}, logs one line and keeps publishing the
-- counters: with the last directories it read (for up to the target's file_map_max_age_seconds), or
-- with `file` and `lun` empty when it never read them. After granting again, end its session
-- (pg_terminate_backend) or reload the exporter to have it read at once.
\set ON_ERROR_STOP on

SELECT NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'lunlat') AS create_login \gset
\if :create_login
CREATE ROLE lunlat LOGIN PASSWORD :'password';
\else
ALTER ROLE lunlat LOGIN PASSWORD :'password';
\endif
GRANT pg_read_all_settings TO lunlat;
