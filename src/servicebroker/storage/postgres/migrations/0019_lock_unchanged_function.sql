-- A SEND transaction's commit in one round trip (issue 29). A commit that wrote its endpoints
-- from copies kept since an earlier commit of the same process (not read again) sends this
-- check first, in the same pipeline as its writes and COMMIT. It locks every endpoint of the
-- conversations in endpoint_id order, FOR UPDATE, as a commit's first read does, and compares
-- each one's row version (xmin) with the version the copy was taken at. Then it checks that
-- no local message waits in the transmission queue. If any endpoint changed, appeared or went,
-- or a local message waits, it raises SQLSTATE SB002. The write transaction then fails and
-- nothing of it is committed. The broker rolls back and commits again, reading the rows.
CREATE FUNCTION servicebroker_lock_unchanged(
    conversations BYTEA[], endpoint_ids BIGINT[], versions BIGINT[]
)
RETURNS VOID
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    locked BIGINT;
    unchanged BIGINT;
BEGIN
    EXECUTE 'SELECT count(*), count(w.endpoint_id)
               FROM (SELECT e.endpoint_id, e.xmin::text::bigint AS version
                       FROM conversation_endpoints e
                      WHERE e.conversation_id = ANY($1)
                      ORDER BY e.endpoint_id
                        FOR UPDATE) AS l
               LEFT JOIN unnest($2, $3) AS w(endpoint_id, version)
                 ON w.endpoint_id = l.endpoint_id AND w.version = l.version'
       INTO locked, unchanged
      USING conversations, endpoint_ids, versions;
    IF locked <> cardinality(endpoint_ids) OR unchanged <> locked THEN
        RAISE EXCEPTION USING ERRCODE = 'SB002',
            MESSAGE = 'a conversation endpoint changed since the commit''s copy of it';
    END IF;
    IF EXISTS (SELECT 1 FROM transmission_queue WHERE is_remote = 0) THEN
        RAISE EXCEPTION USING ERRCODE = 'SB002',
            MESSAGE = 'a local message waits in the transmission queue';
    END IF;
END
$$;
