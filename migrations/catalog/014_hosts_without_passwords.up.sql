-- Host DSNs without their passwords. shardid.hosts is read by every role
-- that routes (docs/upgrading.md); a DSN written with a password in the
-- cluster file put that password in front of all of them. From this
-- version init records a host's DSN without its password (the router takes
-- it from the cluster file, PGPASSWORD or a passfile), and this strips the
-- rows written before: the password of a URL's userinfo, password= and
-- sslpassword= parameters of a URL's query and of the key=value form. A
-- password that is a ${VAR} reference is no secret and stays. The same rules
-- as Go's StripPassword (shardmgr/internal/base/pg/dsn.go) for the DSNs people
-- write; should a rarer spelling differ, init's comparison with the cluster
-- file rewrites the row. The DSNs keep their meaning for every reader
-- (min_reader stays).

-- postgres://user:PASSWORD@host: the userinfo ends at the first '@' that no
-- '/' precedes, as libpq and pgx read it.
UPDATE shardid.hosts
SET dsn = regexp_replace(dsn, '^(postgres(?:ql)?://[^:@/]*):[^@/]*@', '\1@')
WHERE dsn ~ '^postgres(?:ql)?://[^:@/]*:[^@/]*@'
  AND dsn !~ '^postgres(?:ql)?://[^:@/]*:''?\$\{[A-Za-z_][A-Za-z0-9_]*\}''?@';

-- postgres://host/db?sslmode=disable&password=PASSWORD
UPDATE shardid.hosts
SET dsn = regexp_replace(regexp_replace(regexp_replace(dsn,
        '([?&])(?:ssl)?password=(?!''?\$\{[A-Za-z_][A-Za-z0-9_]*\}''?(?:&|$))[^&]*', '\1', 'g'),
        '([?&])&+', '\1', 'g'),
        '[?&]+$', '')
WHERE dsn ~ '^postgres(?:ql)?://[^?]*\?(?:.*&)?(?:ssl)?password=(?!''?\$\{[A-Za-z_][A-Za-z0-9_]*\}''?(?:&|$))';

-- host=db1 password='PASSWORD' dbname=app
UPDATE shardid.hosts
SET dsn = btrim(regexp_replace(dsn,
        '(?:^|[ \t\n\r\v\f]+)(?:ssl)?password[ \t\n\r\v\f]*=[ \t\n\r\v\f]*(?!''?\$\{[A-Za-z_][A-Za-z0-9_]*\}''?(?:[ \t\n\r\v\f]|$))(?:''(?:[^''\\]|\\.)*''|(?:[^ \t\n\r\v\f\\]|\\.)*)',
        '', 'g'), E' \t\n\r\f\v')
WHERE dsn !~ '^postgres(?:ql)?://'
  AND dsn ~ '(?:^|[ \t\n\r\v\f])(?:ssl)?password[ \t\n\r\v\f]*=[ \t\n\r\v\f]*(?!''?\$\{[A-Za-z_][A-Za-z0-9_]*\}''?(?:[ \t\n\r\v\f]|$))';
