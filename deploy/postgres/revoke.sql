-- lunlat: take back what deploy/postgres/grants.sql gave (the login stays; DROP ROLE lunlat removes it).
--   psql -h db1 -U postgres -d postgres -f deploy/postgres/revoke.sql
\set ON_ERROR_STOP on

REVOKE pg_read_all_settings FROM lunlat;
