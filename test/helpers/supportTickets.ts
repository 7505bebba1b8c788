/** The made-up support tickets of the end-to-end training suites (workflow, adaptive): names, invoice issues. */
export const first = [
  'Jane',
  'Omar',
  'Priya',
  'Lucas',
  'Mei',
  'Kwame',
  'Sofia',
  'Ivan',
  'Amara',
  'Diego',
  'Hana',
  'Tomasz',
];
export const last = [
  'Doe',
  'Haddad',
  'Raman',
  'Moreau',
  'Chen',
  'Mensah',
  'Rossi',
  'Petrov',
  'Okafor',
  'Alvarez',
  'Sato',
  'Nowak',
];
export const issues = [
  'was charged twice',
  'never arrived',
  'shows the wrong amount',
  'cannot be downloaded',
  'was cancelled by mistake',
];
